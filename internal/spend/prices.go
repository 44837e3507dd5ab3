package spend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
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

// dearestInput is the highest price any input token of p can be charged:
// uncached, or written to either cache, in either context window.
func (p Price) dearestInput() float64 {
	v := maxRate(p.Rates)
	if p.LongContext != nil {
		v = math.Max(v, maxRate(*p.LongContext))
	}
	return v
}

func (p Price) dearestOutput() float64 {
	v := p.Output
	if p.LongContext != nil {
		v = math.Max(v, p.LongContext.Output)
	}
	return v
}

func maxRate(r Rates) float64 {
	return math.Max(r.Input, math.Max(r.CacheWrite, math.Max(r.CacheWrite1h, r.CacheRead)))
}

// PricesChecked is when DefaultPrices were last checked against
// Anthropic's published prices. An operator should check them again and
// override what has changed (see LoadPrices).
const PricesChecked = "2025-11-24"

// claude is the default Rates of a Claude model priced at input and output
// dollars per million tokens: cache writes at 1.25× input (5 minutes) and
// 2× input (1 hour), cache reads at 0.1× input, as Anthropic prices every
// current model.
func claude(input, output float64) Price {
	return Price{Rates: withCacheRates(Rates{Input: input, Output: output}), WebSearch: DefaultWebSearch, Context: DefaultContext}
}

// withCacheRates fills r's unset cache rates from its input rate with
// Anthropic's multipliers.
func withCacheRates(r Rates) Rates {
	if r.CacheWrite == 0 {
		r.CacheWrite = round6(r.Input * 1.25)
	}
	if r.CacheWrite1h == 0 {
		r.CacheWrite1h = round6(r.Input * 2)
	}
	if r.CacheRead == 0 {
		r.CacheRead = round6(r.Input * 0.1)
	}
	return r
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// defaults are Anthropic's published prices for the Claude API as of
// PricesChecked, by model ID without its date (see Prices.Lookup).
func defaults() map[string]Price {
	sonnet4 := claude(3, 15)
	long := withCacheRates(Rates{Input: 6, Output: 22.5})
	sonnet4.LongContext, sonnet4.LongContextAbove = &long, 200_000
	return map[string]Price{
		"claude-opus-4-5":   claude(5, 25),
		"claude-opus-4-1":   claude(15, 75),
		"claude-opus-4-0":   claude(15, 75),
		"claude-opus-4":     claude(15, 75),
		"claude-sonnet-4-5": sonnet4,
		"claude-sonnet-4-0": sonnet4,
		"claude-sonnet-4":   sonnet4,
		"claude-haiku-4-5":  claude(1, 5),
		"claude-3-7-sonnet": claude(3, 15),
		"claude-3-5-sonnet": claude(3, 15),
		"claude-3-5-haiku":  claude(0.8, 4),
		"claude-3-opus":     claude(15, 75),
		"claude-3-sonnet":   claude(3, 15),
		"claude-3-haiku": {Rates: Rates{Input: 0.25, Output: 1.25, CacheWrite: 0.3, CacheWrite1h: 0.5, CacheRead: 0.03},
			WebSearch: DefaultWebSearch, Context: DefaultContext},
	}
}

// Prices is a price table. It is not changed after it is made, so it is
// safe for concurrent use.
type Prices struct {
	byModel map[string]Price
	// dearest prices a call whose model is not in the table, for a
	// reservation only: the highest rates and context of any model, and
	// a context of at least Context1M.
	dearest Price
}

// DefaultPrices is the table of current Claude models' prices as of
// PricesChecked.
func DefaultPrices() *Prices { return newPrices(defaults()) }

func newPrices(m map[string]Price) *Prices {
	p := &Prices{byModel: m}
	for _, pr := range m {
		p.dearest.Input = math.Max(p.dearest.Input, pr.dearestInput())
		p.dearest.CacheWrite = math.Max(p.dearest.CacheWrite, pr.dearestInput())
		p.dearest.CacheWrite1h = math.Max(p.dearest.CacheWrite1h, pr.dearestInput())
		p.dearest.CacheRead = math.Max(p.dearest.CacheRead, pr.dearestInput())
		p.dearest.Output = math.Max(p.dearest.Output, pr.dearestOutput())
		p.dearest.WebSearch = math.Max(p.dearest.WebSearch, pr.WebSearch)
		p.dearest.Context = max(p.dearest.Context, pr.Context)
	}
	p.dearest.WebSearch = math.Max(p.dearest.WebSearch, DefaultWebSearch)
	p.dearest.Context = max(p.dearest.Context, Context1M)
	return p
}

// MaxPricesFile bounds a price file's size.
const MaxPricesFile = 1 << 20

// LoadPrices reads a price file over the defaults: a JSON object whose
// keys are model IDs and whose values are prices ({"input", "output",
// and optionally "cache_write", "cache_write_1h", "cache_read",
// "long_context", "long_context_above"}, in dollars per million tokens;
// "web_search", in dollars per thousand searches; "context", in tokens)
// or null. A price replaces the default of the same ID or adds one; null
// removes the default, leaving that model unpriced. Omitted cache rates
// are 1.25×, 2× and 0.1× input; an omitted web_search is DefaultWebSearch;
// an omitted context is the default's of the same ID, or Context1M for a
// model the defaults do not have. An empty path is the defaults.
func LoadPrices(path string) (*Prices, error) {
	if path == "" {
		return DefaultPrices(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxPricesFile+1)); err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	if buf.Len() > MaxPricesFile {
		return nil, fmt.Errorf("prices %s: over %d bytes", path, MaxPricesFile)
	}
	p, err := ParsePrices(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	return p, nil
}

// ParsePrices reads a price file's contents over the defaults; see
// LoadPrices. It reports every problem at once.
func ParsePrices(b []byte) (*Prices, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, errors.New("not a JSON object of model IDs to prices")
	}
	m := defaults()
	var problems []string
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if id == "" || strings.ContainsAny(id, " \t\r\n") || len(id) > 200 {
			problems = append(problems, fmt.Sprintf("model ID %q is not a model ID", id))
			continue
		}
		v := raw[id]
		if string(bytes.TrimSpace(v)) == "null" {
			delete(m, id)
			continue
		}
		pr, err := parsePrice(v)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		if pr.Context == 0 {
			pr.Context = Context1M
			if d, ok := m[id]; ok {
				pr.Context = d.Context
			}
		}
		m[id] = pr
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return newPrices(m), nil
}

type ratesFile struct {
	Input        *float64 `json:"input"`
	Output       *float64 `json:"output"`
	CacheWrite   *float64 `json:"cache_write"`
	CacheWrite1h *float64 `json:"cache_write_1h"`
	CacheRead    *float64 `json:"cache_read"`
}

func parsePrice(v json.RawMessage) (Price, error) {
	var f struct {
		ratesFile
		LongContext      *ratesFile `json:"long_context"`
		LongContextAbove int64      `json:"long_context_above"`
		WebSearch        *float64   `json:"web_search"`
		Context          int64      `json:"context"`
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Price{}, fmt.Errorf("not a price (%v)", err)
	}
	r, err := f.ratesFile.rates()
	if err != nil {
		return Price{}, err
	}
	p := Price{Rates: r, WebSearch: DefaultWebSearch, Context: f.Context}
	if f.WebSearch != nil {
		if math.IsNaN(*f.WebSearch) || *f.WebSearch < 0 || *f.WebSearch > 1e6 {
			return Price{}, errors.New("web_search must be a number from 0 to 1000000")
		}
		p.WebSearch = *f.WebSearch
	}
	if f.Context < 0 || f.Context > 1e9 {
		return Price{}, errors.New("context must be a number of tokens from 1 to 1000000000")
	}
	if f.LongContext != nil {
		lr, err := f.LongContext.rates()
		if err != nil {
			return Price{}, fmt.Errorf("long_context: %w", err)
		}
		if f.LongContextAbove <= 0 {
			return Price{}, errors.New("long_context needs long_context_above, a number of input tokens")
		}
		p.LongContext, p.LongContextAbove = &lr, f.LongContextAbove
	} else if f.LongContextAbove != 0 {
		return Price{}, errors.New("long_context_above without long_context")
	}
	return p, nil
}

func (f ratesFile) rates() (Rates, error) {
	if f.Input == nil || f.Output == nil {
		return Rates{}, errors.New("input and output are required, in dollars per million tokens")
	}
	var r Rates
	for _, x := range []struct {
		name string
		v    *float64
		to   *float64
	}{{"input", f.Input, &r.Input}, {"output", f.Output, &r.Output}, {"cache_write", f.CacheWrite, &r.CacheWrite},
		{"cache_write_1h", f.CacheWrite1h, &r.CacheWrite1h}, {"cache_read", f.CacheRead, &r.CacheRead}} {
		if x.v == nil {
			continue
		}
		if math.IsNaN(*x.v) || *x.v < 0 || *x.v > 1e6 {
			return Rates{}, fmt.Errorf("%s must be a number from 0 to 1000000", x.name)
		}
		*x.to = *x.v
	}
	// Unset cache rates follow input; an explicit 0 is kept.
	if f.CacheWrite == nil {
		r.CacheWrite = round6(r.Input * 1.25)
	}
	if f.CacheWrite1h == nil {
		r.CacheWrite1h = round6(r.Input * 2)
	}
	if f.CacheRead == nil {
		r.CacheRead = round6(r.Input * 0.1)
	}
	return r, nil
}

// Lookup finds model's price: by its exact ID, or else by its ID with a
// trailing date (-YYYYMMDD) or -latest removed, so that
// "claude-sonnet-4-5-20250929" is priced as "claude-sonnet-4-5". It
// matches nothing else: a model it does not find is unpriced.
func (p *Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p.byModel[model]; ok {
		return pr, true
	}
	if base, ok := undated(model); ok {
		pr, ok := p.byModel[base]
		return pr, ok
	}
	return Price{}, false
}

// undated is id without a trailing -YYYYMMDD or -latest.
func undated(id string) (string, bool) {
	if base, ok := strings.CutSuffix(id, "-latest"); ok && base != "" {
		return base, true
	}
	i := strings.LastIndexByte(id, '-')
	if i <= 0 || len(id)-i-1 != 8 {
		return "", false
	}
	for _, c := range id[i+1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return id[:i], true
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
// searches (usage.server_tool_use.web_search_requests).
type Tokens struct {
	Input        int64
	Output       int64
	CacheWrite   int64
	CacheWrite1h int64
	CacheRead    int64
	WebSearches  int64
}

// Cost is what t costs at p, in micro-dollars, rounded up.
func (p Price) Cost(t Tokens) int64 {
	r := p.rates(t)
	w1h := min(max(t.CacheWrite1h, 0), max(t.CacheWrite, 0))
	c := float64(t.Input)*r.Input + float64(t.Output)*r.Output +
		float64(t.CacheWrite-w1h)*r.CacheWrite + float64(w1h)*r.CacheWrite1h +
		float64(t.CacheRead)*r.CacheRead + float64(max(t.WebSearches, 0))*p.WebSearch*1000
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
