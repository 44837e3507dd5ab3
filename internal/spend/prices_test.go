package spend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	p := DefaultPrices()
	tests := []struct {
		model string
		ok    bool
		input float64
	}{
		{"claude-sonnet-4-5", true, 3},
		{"claude-sonnet-4-5-20250929", true, 3},
		{"claude-opus-4-5-20251101", true, 5},
		{"claude-opus-4-1-20250805", true, 15},
		{"claude-opus-4-20250514", true, 15},
		{"claude-haiku-4-5-20251001", true, 1},
		{"claude-3-5-haiku-latest", true, 0.8},
		{"claude-3-haiku-20240307", true, 0.25},
		{"claude-3-7-sonnet-20250219", true, 3},
		// Nothing but an exact ID or a date or -latest after one matches.
		{"claude-sonnet-4-5-2025092", false, 0},
		{"claude-sonnet-4-5-2025092x", false, 0},
		{"claude-sonnet-4-5-thinking", false, 0},
		{"claude-opus-9-9", false, 0},
		{"claude-sonnet", false, 0},
		{"gpt-4o", false, 0},
		{"", false, 0},
		{"-latest", false, 0},
		{"-20250101", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			got, ok := p.Lookup(tt.model)
			if ok != tt.ok || got.Input != tt.input {
				t.Errorf("Lookup(%q) = %v, %v, want input %v, %v", tt.model, got.Input, ok, tt.input, tt.ok)
			}
		})
	}
}

func TestCost(t *testing.T) {
	p := DefaultPrices()
	tests := []struct {
		name   string
		model  string
		tokens Tokens
		want   int64 // micro-dollars
	}{
		{"sonnet input and output", "claude-sonnet-4-5", Tokens{Input: 1000, Output: 1000}, 1000*3 + 1000*15},
		{"sonnet caches", "claude-sonnet-4-5", Tokens{Input: 10, CacheWrite: 100, CacheWrite1h: 40, CacheRead: 1000, Output: 1},
			// 10×3 + 60×3.75 + 40×6 + 1000×0.3 + 1×15
			30 + 225 + 240 + 300 + 15},
		{"haiku 3 cache read rounds up", "claude-3-haiku", Tokens{CacheRead: 1}, 1},
		{"opus 4.5", "claude-opus-4-5-20251101", Tokens{Input: 2_000_000, Output: 100_000}, 10_000_000 + 2_500_000},
		{"sonnet long context", "claude-sonnet-4-5", Tokens{Input: 150_000, CacheRead: 60_000, Output: 1000},
			150_000*6 + 60_000*0.6 + 1000*22.5},
		{"sonnet at the long-context edge", "claude-sonnet-4-5", Tokens{Input: 200_000}, 200_000 * 3},
		{"nothing", "claude-haiku-4-5", Tokens{}, 0},
		{"web searches at $10 a thousand", "claude-haiku-4-5", Tokens{Input: 1000, WebSearches: 3}, 1000 + 3*10_000},
		{"a negative count of searches", "claude-haiku-4-5", Tokens{WebSearches: -3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, ok := p.Lookup(tt.model)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.model)
			}
			if got := pr.Cost(tt.tokens); got != tt.want {
				t.Errorf("Cost(%s, %+v) = %d, want %d", tt.model, tt.tokens, got, tt.want)
			}
		})
	}
}

func TestParsePrices_Overrides(t *testing.T) {
	p, err := ParsePrices([]byte(`{
		"claude-sonnet-4-5": {"input": 2, "output": 10},
		"claude-opus-4-1": null,
		"my-model": {"input": 1, "output": 2, "cache_write": 0, "cache_read": 0.5},
		"long-model": {"input": 1, "output": 2, "long_context": {"input": 4, "output": 8}, "long_context_above": 100}
	}`))
	if err != nil {
		t.Fatalf("ParsePrices = %v, want nil", err)
	}
	tests := []struct {
		model string
		ok    bool
		want  Rates
	}{
		// Replaced; cache rates follow the new input rate.
		{"claude-sonnet-4-5-20250929", true, Rates{Input: 2, Output: 10, CacheWrite: 2.5, CacheWrite1h: 4, CacheRead: 0.2}},
		// Removed: unpriced, never zero.
		{"claude-opus-4-1-20250805", false, Rates{}},
		// Added, an explicit 0 kept.
		{"my-model", true, Rates{Input: 1, Output: 2, CacheWrite: 0, CacheWrite1h: 2, CacheRead: 0.5}},
		// Untouched defaults stay.
		{"claude-haiku-4-5", true, Rates{Input: 1, Output: 5, CacheWrite: 1.25, CacheWrite1h: 2, CacheRead: 0.1}},
	}
	for _, tt := range tests {
		got, ok := p.Lookup(tt.model)
		if ok != tt.ok || got.Rates != tt.want {
			t.Errorf("Lookup(%q) = %+v, %v, want %+v, %v", tt.model, got.Rates, ok, tt.want, tt.ok)
		}
	}
	long, _ := p.Lookup("long-model")
	if got := long.Cost(Tokens{Input: 101, Output: 1}); got != 101*4+8 {
		t.Errorf("Cost(long-model, 101 in) = %d, want %d", got, 101*4+8)
	}
	if got := long.Cost(Tokens{Input: 100, Output: 1}); got != 100+2 {
		t.Errorf("Cost(long-model, 100 in) = %d, want %d", got, 102)
	}
	// The dearest rates bound an unknown model, the file's included.
	if got := p.dearest.Output; got != 75 {
		t.Errorf("dearest output = %v, want 75 (claude-3-opus)", got)
	}
}

// TestParsePrices_ContextAndSearches: a price's context window and web
// search price are read, and default to the same model's default window
// (or, for a model the defaults do not have, the 1M window) and to $10 a
// thousand searches.
func TestParsePrices_ContextAndSearches(t *testing.T) {
	p, err := ParsePrices([]byte(`{
		"claude-sonnet-4-5": {"input": 2, "output": 10},
		"small-model": {"input": 1, "output": 2, "context": 32000, "web_search": 5},
		"new-model": {"input": 1, "output": 2}
	}`))
	if err != nil {
		t.Fatalf("ParsePrices = %v, want nil", err)
	}
	tests := []struct {
		model     string
		context   int64
		webSearch float64
	}{
		{"claude-sonnet-4-5", DefaultContext, DefaultWebSearch},
		{"small-model", 32000, 5},
		{"new-model", Context1M, DefaultWebSearch},
		{"claude-haiku-4-5", DefaultContext, DefaultWebSearch},
	}
	for _, tt := range tests {
		got, _ := p.Lookup(tt.model)
		if got.Context != tt.context || got.WebSearch != tt.webSearch {
			t.Errorf("Lookup(%q) context %d, web search %v, want %d, %v", tt.model, got.Context, got.WebSearch, tt.context, tt.webSearch)
		}
	}
	if p.dearest.Context != Context1M {
		t.Errorf("dearest context = %d, want %d", p.dearest.Context, Context1M)
	}
}

func TestParsePrices_Bad(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"not an object", `[1]`, "not a JSON object"},
		{"no output", `{"m": {"input": 1}}`, "m: input and output are required"},
		{"negative", `{"m": {"input": -1, "output": 1}}`, "m: input must be a number from 0"},
		{"unknown field", `{"m": {"input": 1, "output": 1, "imput": 2}}`, "m: not a price"},
		{"a string", `{"m": "cheap"}`, "m: not a price"},
		{"blank ID", `{" ": {"input": 1, "output": 1}}`, "is not a model ID"},
		{"long context without its threshold", `{"m": {"input": 1, "output": 1, "long_context": {"input": 2, "output": 2}}}`, "needs long_context_above"},
		{"every problem", `{"a": {"input": 1}, "b": {"output": 1}}`, "per million tokens; b: input and output"},
		{"negative web search", `{"m": {"input": 1, "output": 1, "web_search": -1}}`, "m: web_search must be a number from 0"},
		{"negative context", `{"m": {"input": 1, "output": 1, "context": -1}}`, "m: context must be a number of tokens"},
		{"fractional context", `{"m": {"input": 1, "output": 1, "context": 1.5}}`, "m: not a price"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePrices([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParsePrices(%s) = %v, want an error holding %q", tt.file, err, tt.want)
			}
		})
	}
}

func TestLoadPrices(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "prices.json")
	if err := os.WriteFile(good, []byte(`{"claude-haiku-4-5": {"input": 7, "output": 9}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPrices(good)
	if err != nil {
		t.Fatalf("LoadPrices(good) = %v, want nil", err)
	}
	if pr, _ := p.Lookup("claude-haiku-4-5"); pr.Input != 7 {
		t.Errorf("LoadPrices(good): haiku input = %v, want 7", pr.Input)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"m": {"input": 1, "output": 1}, "pad": "`+strings.Repeat("x", MaxPricesFile)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrices(big); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("LoadPrices(big) = %v, want an error saying it is over the bound", err)
	}
	if _, err := LoadPrices(filepath.Join(dir, "missing.json")); err == nil {
		t.Errorf("LoadPrices(missing) = nil, want an error")
	}
	if p, err := LoadPrices(""); err != nil || len(p.Models()) != len(builtinModels()) {
		t.Errorf("LoadPrices(\"\") = %v, %v, want the defaults", p, err)
	}
}

func TestUSD(t *testing.T) {
	tests := []struct {
		in     string
		micros int64
		ok     bool
		out    string
	}{
		{"25", 25_000_000, true, "$25.00"},
		{"25.00", 25_000_000, true, "$25.00"},
		{"$0.50", 500_000, true, "$0.50"},
		{"0.019123", 19_123, true, "$0.019123"},
		{"0.0000001", 0, false, ""},
		{"1000000000", 1_000_000_000_000_000, true, "$1000000000.00"},
		{"1000000001", 0, false, ""},
		{"-1", 0, false, ""},
		{"1e3", 0, false, ""},
		{"NaN", 0, false, ""},
		{"1.", 0, false, ""},
		{".5", 0, false, ""},
		{"", 0, false, ""},
		{"1,000", 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUSD(tt.in)
			if (err == nil) != tt.ok || got != tt.micros {
				t.Fatalf("ParseUSD(%q) = %d, %v, want %d, ok %v", tt.in, got, err, tt.micros, tt.ok)
			}
			if tt.ok {
				if s := FormatUSD(got); s != tt.out {
					t.Errorf("FormatUSD(%d) = %q, want %q", got, s, tt.out)
				}
			}
		})
	}
}

func builtinModels() map[string]Price {
	m, _ := builtinPrices()
	return m
}

// TestPrices_BuiltinTableParses: the embedded prices.json parses, says
// when it was checked, and prices every model it names.
func TestPrices_BuiltinTableParses(t *testing.T) {
	m := map[string]Price{}
	md, err := parseInto(m, builtin)
	if err != nil {
		t.Fatalf("parseInto(prices.json) = %v", err)
	}
	if _, err := time.Parse(time.DateOnly, md.checked); err != nil || md.source == "" {
		t.Errorf("prices.json $checked = %q, $source = %q, want a date and a source", md.checked, md.source)
	}
	for id, pr := range m {
		if pr.Input <= 0 || pr.Output <= 0 || pr.CacheWrite <= 0 || pr.CacheWrite1h <= 0 || pr.CacheRead <= 0 || pr.Context <= 0 {
			t.Errorf("prices.json %s = %+v, want every rate and the context set", id, pr)
		}
	}
	if p := DefaultPrices(); p.Checked() != md.checked {
		t.Errorf("DefaultPrices().Checked() = %q, want %q", p.Checked(), md.checked)
	}
}

// TestPrices_ClaudeCodeDefaultModelIsPriced: the models current Claude
// Code and the SDKs send, and every family ID and alias before them, are
// in the table at Anthropic's prices, dated or not.
func TestPrices_ClaudeCodeDefaultModelIsPriced(t *testing.T) {
	p := DefaultPrices()
	tests := []struct {
		model                                string
		input, output, cw5m, cw1h, cacheRead float64
	}{
		{"claude-opus-5-5", 4, 20, 5, 8, 0.2},
		{"claude-opus-5-5[1m]", 4, 20, 5, 8, 0.2},
		{"claude-opus-5", 5, 25, 6.25, 10, 0.5},
		{"claude-opus-4-8", 5, 25, 6.25, 10, 0.5},
		{"claude-opus-4-7", 5, 25, 6.25, 10, 0.5},
		{"claude-opus-4-6", 5, 25, 6.25, 10, 0.5},
		{"claude-opus-4-5-20251101", 5, 25, 6.25, 10, 0.5},
		{"claude-opus-4-1-20250805", 15, 75, 18.75, 30, 1.5},
		{"claude-opus-4-0", 15, 75, 18.75, 30, 1.5},
		{"claude-opus-4-20250514", 15, 75, 18.75, 30, 1.5},
		{"claude-3-opus-latest", 15, 75, 18.75, 30, 1.5},
		{"claude-fable-5-1", 10, 50, 12.5, 20, 0.25},
		{"claude-mythos-5", 10, 50, 12.5, 20, 1},
		{"claude-sonnet-5-5", 2, 10, 2.5, 4, 0.1},
		{"claude-sonnet-5", 2, 10, 2.5, 4, 0.2},
		{"claude-sonnet-4-6", 3, 15, 3.75, 6, 0.3},
		{"claude-sonnet-4-5-20250929", 3, 15, 3.75, 6, 0.3},
		{"claude-sonnet-4-5@20250929", 3, 15, 3.75, 6, 0.3},
		{"claude-sonnet-4-20250514", 3, 15, 3.75, 6, 0.3},
		{"claude-3-7-sonnet-latest", 3, 15, 3.75, 6, 0.3},
		{"claude-3-5-sonnet-20241022", 3, 15, 3.75, 6, 0.3},
		{"claude-haiku-5-5", 0.1, 0.5, 0.125, 0.2, 0.01},
		{"claude-haiku-4-5-20251001", 1, 5, 1.25, 2, 0.1},
		{"claude-3-5-haiku-20241022", 0.8, 4, 1, 1.6, 0.08},
		{"claude-3-haiku-20240307", 0.25, 1.25, 0.3, 0.5, 0.03},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			res := p.Resolve(tt.model)
			want := Rates{Input: tt.input, Output: tt.output, CacheWrite: tt.cw5m, CacheWrite1h: tt.cw1h, CacheRead: tt.cacheRead}
			if res.Match != Exact || res.Rates != want {
				t.Errorf("Resolve(%q) = %+v, %v, want %+v, exact", tt.model, res.Rates, res.Match, want)
			}
		})
	}
	// The "hi": 10 tokens in, 6 out, measured and charged alike.
	if got := p.Resolve("claude-opus-5-5").Cost(Tokens{Input: 10, Output: 6}); got != 10*4+6*20 {
		t.Errorf("claude-opus-5-5 \"hi\" costs %d micro-dollars, want %d", got, 10*4+6*20)
	}
	// Haiku 5.5's prompts over 100K tokens are dearer.
	if got := p.Resolve("claude-haiku-5-5").Cost(Tokens{Input: 100_001}); got != micros(100_001*0.5) {
		t.Errorf("claude-haiku-5-5 over 100K input costs %d, want %d", got, micros(100_001*0.5))
	}
}

// TestPrices_UnknownModelIsPricedByFamilyOrAsTheDearest: a model the table
// does not name is priced as its family's newest model, and else as the
// dearest, and Resolve says which.
func TestPrices_UnknownModelIsPricedByFamilyOrAsTheDearest(t *testing.T) {
	p := DefaultPrices()
	if p.UnpricedAs() != "claude-opus-4-1" {
		t.Fatalf("UnpricedAs() = %q, want claude-opus-4-1", p.UnpricedAs())
	}
	tests := []struct {
		model string
		as    string
		match Match
	}{
		{"claude-opus-6", "claude-opus-5-5", Family},
		{"claude-opus-6-1-20270101", "claude-opus-5-5", Family},
		{"claude-opus-4-2", "claude-opus-5-5", Family},
		{"claude-sonnet-6", "claude-sonnet-5-5", Family},
		{"claude-haiku-6-5[1m]", "claude-haiku-5-5", Family},
		{"claude-4-haiku", "claude-haiku-5-5", Family},
		{"claude-fable-5-2", "claude-fable-5-1", Family},
		{"claude-mystery-9", "claude-opus-4-1", Unpriced},
		{"claude-sonnet-4-5-thinking", "claude-opus-4-1", Unpriced},
		{"claude-opus", "claude-opus-4-1", Unpriced},
		{"gpt-4o", "claude-opus-4-1", Unpriced},
		{"", "claude-opus-4-1", Unpriced},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			res := p.Resolve(tt.model)
			want, _ := p.Get(tt.as)
			if res.As != tt.as || res.Match != tt.match || res.Rates != want.Rates {
				t.Errorf("Resolve(%q) = %s (%v), want %s (%v)", tt.model, res.As, res.Match, tt.as, tt.match)
			}
		})
	}
	q, err := p.WithUnpricedAs("claude-haiku-4-5")
	if err != nil || q.Resolve("gpt-4o").As != "claude-haiku-4-5" || p.Resolve("gpt-4o").As != "claude-opus-4-1" {
		t.Errorf("WithUnpricedAs(claude-haiku-4-5) = %v, %v: want gpt-4o priced as it, and p unchanged", q, err)
	}
	if _, err := p.WithUnpricedAs("claude-nosuch"); err == nil || !strings.Contains(err.Error(), "claude-nosuch") {
		t.Errorf("WithUnpricedAs(claude-nosuch) = %v, want an error naming it", err)
	}
}

// TestParsePrices_NullLeavesAModelUnpriced: a price file's null removes a
// model, which its family does not then price, and a price file's
// $checked replaces the table's date.
func TestParsePrices_NullLeavesAModelUnpriced(t *testing.T) {
	p, err := ParsePrices([]byte(`{"$checked": "2027-01-02", "$source": "my desk", "claude-haiku-4-5": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if res := p.Resolve("claude-haiku-4-5-20251001"); res.Match != Unpriced {
		t.Errorf("Resolve(removed claude-haiku-4-5) = %v as %s, want unpriced", res.Match, res.As)
	}
	if p.Checked() != "2027-01-02" || p.Source() != "my desk" {
		t.Errorf("Checked(), Source() = %q, %q, want the file's", p.Checked(), p.Source())
	}
	for _, bad := range []string{`{"$checked": "yesterday"}`, `{"$checked": 7}`, `{"$note": "x"}`} {
		if _, err := ParsePrices([]byte(bad)); err == nil {
			t.Errorf("ParsePrices(%s) = nil, want an error", bad)
		}
	}
}

// TestPrices_FileRoundTrips: the table written as a price file makes the
// same table.
func TestPrices_FileRoundTrips(t *testing.T) {
	for _, start := range []string{`{}`, `{"claude-haiku-4-5": null, "my-model": {"input": 1, "output": 2, "web_search": 0}}`} {
		p, err := ParsePrices([]byte(start))
		if err != nil {
			t.Fatal(err)
		}
		b, err := p.File()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ParsePrices(b)
		if err != nil {
			t.Fatalf("ParsePrices(File()) = %v\n%s", err, b)
		}
		if !slices.Equal(p.Models(), q.Models()) || !slices.Equal(p.Removed(), q.Removed()) || p.Checked() != q.Checked() || p.UnpricedAs() != q.UnpricedAs() {
			t.Fatalf("ParsePrices(File()) models %v, want %v", q.Models(), p.Models())
		}
		for _, id := range p.Models() {
			a, _ := p.Get(id)
			c, _ := q.Get(id)
			if a.Rates != c.Rates || a.Context != c.Context || a.WebSearch != c.WebSearch || a.LongContextAbove != c.LongContextAbove ||
				(a.LongContext == nil) != (c.LongContext == nil) || (a.LongContext != nil && *a.LongContext != *c.LongContext) {
				t.Errorf("%s: %+v after a round trip, want %+v", id, c, a)
			}
		}
	}
}
