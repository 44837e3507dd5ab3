package spend

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Rates are what one model's tokens cost, in US dollars per million
// tokens. A dollar per million tokens is a micro-dollar per token, so a
// cost in micro-dollars is tokens times rate.
type Rates struct {
	// Input is the price of uncached input tokens.
	Input float64 `json:"input"`
	// Output is the price of output tokens, thinking included.
	Output float64 `json:"output"`
	// CacheWrite is the price of input written to the 5-minute cache.
	CacheWrite float64 `json:"cache_write"`
	// CacheWrite1h is the price of input written to the 1-hour cache.
	CacheWrite1h float64 `json:"cache_write_1h"`
	// CacheRead is the price of input read from the cache.
	CacheRead float64 `json:"cache_read"`
}

// Price is one model's price. LongContext, when set, replaces Rates for a
// call whose whole input (uncached, cache writes and cache reads) is over
// LongContextAbove tokens, as Anthropic prices Sonnet 4's 1M-token window.
type Price struct {
	Rates
	LongContext      *Rates `json:"long_context,omitempty"`
	LongContextAbove int64  `json:"long_context_above,omitempty"`
	// WebSearch is the price of web searches, in US dollars per thousand.
	WebSearch float64 `json:"web_search,omitempty"`
	// Context is the model's context window, in tokens: the most input
	// one sampling takes, without the 1M-token window's beta header (with
	// it, Context1M). It bounds the input of a call whose input the API
	// fetches or makes itself.
	Context int64 `json:"context,omitempty"`
	// GeoUS multiplies every token rate (not WebSearch) of a call whose
	// inference runs only in the US (a Messages body's "inference_geo":
	// "us"), as Anthropic prices it from Opus 4.6 on; 0 is 1, for a
	// model that takes no inference_geo (the API refuses the call).
	GeoUS float64 `json:"inference_geo_us,omitempty"`
}

// DefaultGeoUS is Anthropic's multiplier of the token rates of a call
// whose inference runs only in the US, on every model that takes
// inference_geo.
const DefaultGeoUS = 1.1

// geoFactor is what p's token rates are multiplied by for a call whose
// inference runs in geo ("" or "global": anywhere, at the standard
// rates). A geo but those is priced at GeoUS: "us" is the only other the
// API takes, and it refuses, unbilled, a value it does not know.
func (p Price) geoFactor(geo string) float64 {
	if geo == "" || geo == "global" || p.GeoUS <= 1 {
		return 1
	}
	return p.GeoUS
}

// geoBound bounds what p's token rates are multiplied by for a call that
// asks its inference to run in geo: geoFactor of the geo it names, or,
// when it names none (""), GeoUS, since the API then runs it in the
// workspace's default geography, which may be the US.
func (p Price) geoBound(geo string) float64 {
	if geo == "" {
		return max(p.GeoUS, 1)
	}
	return p.geoFactor(geo)
}

// Context windows, in tokens. Every model in DefaultPrices takes
// DefaultContext tokens; Sonnet 4 and 4.5 take Context1M with the
// anthropic-beta header context-1m-2025-08-07. A model added by a price
// file without a "context" is taken to take Context1M, and a call asking
// for the 1M window is bounded by it whatever its model.
const (
	DefaultContext = 200_000
	Context1M      = 1_000_000
)

// DefaultWebSearch is Anthropic's price of web searches: US dollars per
// thousand.
const DefaultWebSearch = 10

// rates returns the rates a call with t's input is priced at.
func (p Price) rates(t Tokens) Rates {
	if p.LongContext != nil && t.Input+t.CacheWrite+t.CacheRead > p.LongContextAbove {
		return *p.LongContext
	}
	return p.Rates
}

// dearest is the highest of rate over p's rates in either context
// window; dearestInput the highest price any input token of p can be
// charged (uncached, or written to either cache), and dearestOutput any
// output token's.
func (p Price) dearest(rate func(Rates) float64) float64 {
	v := rate(p.Rates)
	if p.LongContext != nil {
		v = math.Max(v, rate(*p.LongContext))
	}
	return v
}

func (p Price) dearestInput() float64 {
	return p.dearest(func(r Rates) float64 { return max(r.Input, r.CacheWrite, r.CacheWrite1h, r.CacheRead) })
}

func (p Price) dearestOutput() float64 { return p.dearest(func(r Rates) float64 { return r.Output }) }

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// builtin is the built-in price table, in the form of a price file (see
// LoadPrices), with the date it was checked against Anthropic's published
// prices in "$checked". An operator should check them again and override
// what has changed with a price file; `boxbroker prices` prints them.
//
//go:embed prices.json
var builtin []byte

// builtinPrices are the built-in prices, by model ID without its date (see
// Prices.Lookup), and when and where they were checked.
func builtinPrices() (map[string]Price, meta) {
	m := map[string]Price{}
	md, err := parseInto(m, builtin)
	if err != nil {
		// The embedded file is tested (TestPrices_BuiltinTableParses).
		panic("spend: the built-in prices.json: " + err.Error())
	}
	return m, md
}

// meta is what a price file says of itself.
type meta struct {
	// checked is when its prices were checked, YYYY-MM-DD.
	checked string
	// source is where they were checked.
	source string
	// removed is the IDs a price file's nulls removed: models it leaves
	// unpriced, which Resolve does not price by their family.
	removed []string
}

// Prices is a price table. It is not changed after it is made, so it is
// safe for concurrent use.
type Prices struct {
	byModel map[string]Price
	meta
	// newest is each family's newest model in the table (see family).
	newest map[string]string
	// unpricedAs is the model whose price a model neither in the table
	// nor of a family in it is charged at: see WithUnpricedAs.
	unpricedAs string
	// path is the price file LoadPrices read, "" for the built-in table.
	path string
	// dearest prices a call whose model is not known at all (its body
	// was not read), for a reservation only: the highest rates and
	// context of any model, and a context of at least Context1M.
	dearest Price
}

// DefaultPrices is the built-in table of Claude models' prices as of its
// Checked date.
func DefaultPrices() *Prices {
	m, md := builtinPrices()
	return newPrices(m, md)
}

func newPrices(m map[string]Price, md meta) *Prices {
	p := &Prices{byModel: m, meta: md, newest: map[string]string{}}
	newestVer := map[string][]int{}
	for id, pr := range m {
		in := math.Max(p.dearest.Input, pr.dearestInput()) // every input rate alike
		p.dearest.Input, p.dearest.CacheWrite, p.dearest.CacheWrite1h, p.dearest.CacheRead = in, in, in, in
		p.dearest.Output = math.Max(p.dearest.Output, pr.dearestOutput())
		p.dearest.WebSearch = math.Max(p.dearest.WebSearch, pr.WebSearch)
		p.dearest.Context = max(p.dearest.Context, pr.Context)
		p.dearest.GeoUS = math.Max(p.dearest.GeoUS, pr.GeoUS)
		if fam, ver, ok := family(id); ok {
			cur, seen := newestVer[fam]
			if !seen || newer(ver, cur) || (!newer(cur, ver) && id > p.newest[fam]) {
				newestVer[fam], p.newest[fam] = ver, id
			}
		}
		if p.unpricedAs == "" || dearer(id, pr, p.unpricedAs, m[p.unpricedAs]) {
			p.unpricedAs = id
		}
	}
	p.dearest.WebSearch = math.Max(p.dearest.WebSearch, DefaultWebSearch)
	p.dearest.Context = max(p.dearest.Context, Context1M)
	return p
}

// dearer reports whether model a at price pa is dearer than b at pb: by
// its dearest output rate, then its dearest input rate, then, to choose
// one of models of the same price whatever the map's order, by ID.
func dearer(a string, pa Price, b string, pb Price) bool {
	if oa, ob := pa.dearestOutput(), pb.dearestOutput(); oa != ob {
		return oa > ob
	}
	if ia, ib := pa.dearestInput(), pb.dearestInput(); ia != ib {
		return ia > ib
	}
	return a > b
}

// Checked is when the table's prices were checked against Anthropic's
// published prices (YYYY-MM-DD): the price file's "$checked" when it has
// one, else the built-in table's.
func (p *Prices) Checked() string { return p.checked }

// Path is the price file the table was read from over the built-in one
// (LoadPrices), "" for the built-in table alone or one ParsePrices made.
func (p *Prices) Path() string { return p.path }

// Source is where the table's prices were checked ("" when not said).
func (p *Prices) Source() string { return p.source }

// UnpricedAs is the model whose price a model neither in the table nor of
// a family in it is charged at: by default the dearest model in the table
// (by output rate, then input rate).
func (p *Prices) UnpricedAs() string { return p.unpricedAs }

// WithUnpricedAs returns a copy of p that charges a model neither in the
// table nor of a family in it at model's price. An empty model is p. It
// returns an error when model is not in the table.
func (p *Prices) WithUnpricedAs(model string) (*Prices, error) {
	if model == "" {
		return p, nil
	}
	if _, ok := p.byModel[model]; !ok {
		return nil, fmt.Errorf("%q is not in the price table (boxbroker prices lists it)", model)
	}
	q := *p
	q.unpricedAs = model
	return &q, nil
}

// Lookup finds model's price: by its exact ID, or else by its ID with a
// trailing "[1m]" (Claude Code's mark of the 1M window) and then a
// trailing date (-YYYYMMDD, or @YYYYMMDD as Vertex AI writes it) or
// -latest removed, so that "claude-sonnet-4-5-20250929" is priced as
// "claude-sonnet-4-5". It matches nothing else; Resolve also matches a
// model by its family.
func (p *Prices) Lookup(model string) (Price, bool) {
	_, pr, ok := p.lookup(model)
	return pr, ok
}

// lookup is Lookup, with the table's ID of what it found.
func (p *Prices) lookup(model string) (string, Price, bool) {
	if pr, ok := p.byModel[model]; ok {
		return model, pr, true
	}
	base := undated(model)
	if base == model {
		return "", Price{}, false
	}
	pr, ok := p.byModel[base]
	return base, pr, ok
}

// undated is id without a trailing "[1m]", then without a trailing
// -YYYYMMDD, @YYYYMMDD or -latest; "" when nothing is left.
func undated(id string) string {
	id = strings.TrimSuffix(id, "[1m]")
	if base, ok := strings.CutSuffix(id, "-latest"); ok {
		return base
	}
	i := strings.LastIndexAny(id, "-@")
	if i < 0 || len(id)-i-1 != 8 {
		return id
	}
	for _, c := range id[i+1:] {
		if c < '0' || c > '9' {
			return id
		}
	}
	return id[:i]
}

// Match is how Resolve found a model's price.
type Match int

const (
	// Exact: the model is in the table, by its ID or its undated ID
	// (see Lookup).
	Exact Match = iota
	// Family: the model is not in the table, but its family is: it is
	// priced as the family's newest model in the table.
	Family
	// Unpriced: neither the model nor its family is in the table: it is
	// priced as the table's UnpricedAs model.
	Unpriced
)

// String is "exact", "family" or "unpriced".
func (m Match) String() string {
	switch m {
	case Exact:
		return "exact"
	case Family:
		return "family"
	}
	return "unpriced"
}

// Resolved is a model's price as Resolve found it.
type Resolved struct {
	Price
	// As is the table's model whose price it is ("" for a table with no
	// model at all, whose Price is then the dearest rates of none).
	As string
	// Match is how it was found.
	Match Match
}

// Resolve finds the price a call of model is charged at. A model Lookup
// finds is priced exactly; else a model of a family the table has — its
// ID, undated, is "claude-" and a family word with version numbers before
// or after it, as in claude-opus-5-5 or claude-3-5-haiku — is priced as
// that family's newest model in the table (an unknown claude-opus-9 as the
// newest opus); else it is priced as UnpricedAs, the dearest model by
// default. Only Exact is a price the table states; the caller says so of
// the others (Meter warns once per model).
func (p *Prices) Resolve(model string) Resolved {
	if id, pr, ok := p.lookup(model); ok {
		return Resolved{Price: pr, As: id, Match: Exact}
	}
	base := undated(model)
	if fam, _, ok := family(base); ok && !slices.Contains(p.removed, base) && !slices.Contains(p.removed, model) {
		if id, ok := p.newest[fam]; ok {
			return Resolved{Price: p.byModel[id], As: id, Match: Family}
		}
	}
	if p.unpricedAs == "" {
		return Resolved{Price: p.dearest, Match: Unpriced}
	}
	// A model the table does not know may take inference_geo, as every
	// model after Opus 4.5 does: priced at the dearest multiplier.
	pr := p.byModel[p.unpricedAs]
	pr.GeoUS = math.Max(pr.GeoUS, p.dearest.GeoUS)
	return Resolved{Price: pr, As: p.unpricedAs, Match: Unpriced}
}

// family parses a Claude model ID (undated): "claude-", then one family
// word of lower-case letters, and one to three version numbers before it
// or after it (claude-opus-4-5, claude-3-5-haiku, claude-sonnet-5). It
// reports false for anything else (claude-sonnet-4-5-thinking, gpt-4o).
func family(id string) (fam string, ver []int, ok bool) {
	rest, ok := strings.CutPrefix(id, "claude-")
	if !ok {
		return "", nil, false
	}
	for _, part := range strings.Split(rest, "-") {
		if n, err := strconv.Atoi(part); err == nil && n >= 0 && len(part) <= 4 {
			ver = append(ver, n)
			continue
		}
		if fam != "" || part == "" || strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") != "" {
			return "", nil, false
		}
		fam = part
	}
	if fam == "" || len(ver) == 0 || len(ver) > 3 {
		return "", nil, false
	}
	return fam, ver, true
}

// newer reports whether version a is after b (4-5 after 4, 5 after 4-8).
func newer(a, b []int) bool {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x > y
		}
	}
	return false
}

// Models returns the table's model IDs, sorted.
func (p *Prices) Models() []string {
	ids := make([]string, 0, len(p.byModel))
	for id := range p.byModel {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Tokens are the tokens one call used, as the upstream reports them.
// CacheWrite counts every token written to a cache; CacheWrite1h those of
// them written to the 1-hour cache. WebSearches counts the call's web
// searches (usage.server_tool_use.web_search_requests). Geo is where
// the call's inference ran, as its request asked (inference_geo) or its
// answer reported (usage.inference_geo): "" or "global" for anywhere.
type Tokens struct {
	Input        int64
	Output       int64
	CacheWrite   int64
	CacheWrite1h int64
	CacheRead    int64
	WebSearches  int64
	Geo          string
}

// Cost is what t costs at p, in micro-dollars, rounded up: its tokens at
// p's rates times p's multiplier of t.Geo, and its web searches.
func (p Price) Cost(t Tokens) int64 {
	r := p.rates(t)
	w1h := min(max(t.CacheWrite1h, 0), max(t.CacheWrite, 0))
	c := (float64(t.Input)*r.Input+float64(t.Output)*r.Output+
		float64(t.CacheWrite-w1h)*r.CacheWrite+float64(w1h)*r.CacheWrite1h+
		float64(t.CacheRead)*r.CacheRead)*p.geoFactor(t.Geo) +
		float64(max(t.WebSearches, 0))*p.WebSearch*1000
	return micros(c)
}

// micros rounds a cost in micro-dollars up to a whole one, within what an
// int64 holds.
func micros(c float64) int64 {
	if math.IsNaN(c) || c <= 0 {
		return 0
	}
	if c >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	// Rates have at most six decimals; shave float noise before rounding up.
	return int64(math.Ceil(c - 1e-6))
}

// Get is the table's price of model, by its exact ID in the table (see
// Models), with no date removed or family matched.
func (p *Prices) Get(model string) (Price, bool) {
	pr, ok := p.byModel[model]
	return pr, ok
}

// Removed is the model IDs a price file removed (its nulls), sorted.
func (p *Prices) Removed() []string {
	ids := slices.Clone(p.removed)
	sort.Strings(ids)
	return ids
}

// filePrice is Price's form in a price file, with every rate written
// out (Price leaves out what is zero). Its fields are Price's.
type filePrice struct {
	Rates
	LongContext      *Rates  `json:"long_context,omitempty"`
	LongContextAbove int64   `json:"long_context_above,omitempty"`
	WebSearch        float64 `json:"web_search"`
	Context          int64   `json:"context"`
	GeoUS            float64 `json:"inference_geo_us"`
}

// File is the whole table as a price file (see LoadPrices), one model a
// line: given as --prices, it makes the same table.
func (p *Prices) File() ([]byte, error) {
	var lines []string
	var err error
	line := func(key string, v any) {
		k, kerr := json.Marshal(key)
		val, verr := json.Marshal(v)
		err = cmp.Or(err, kerr, verr)
		lines = append(lines, "  "+string(k)+": "+string(val))
	}
	for _, kv := range [...][2]string{{"$checked", p.checked}, {"$source", p.source}} {
		if kv[1] != "" {
			line(kv[0], kv[1])
		}
	}
	for _, id := range p.Models() {
		line(id, filePrice(p.byModel[id]))
	}
	for _, id := range p.Removed() {
		line(id, nil)
	}
	if err != nil {
		return nil, err
	}
	return []byte("{\n" + strings.Join(lines, ",\n") + "\n}\n"), nil
}
