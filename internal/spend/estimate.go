package spend

import (
	"github.com/intentius/boxbroker/internal/capability"
)

// Estimate is what the broker knows of a request before it is forwarded:
// what its capability estimated (the model, "" when unknown, and how
// many calls it makes), and for each of its Calls a bound on its input
// and output tokens. Output, not the capability's MaxTokens, bounds the
// output: EstimateOf folds the meter's own bound into it.
type Estimate struct {
	capability.Estimate
	// Input bounds each call's input tokens, from the body's size and
	// the tools' definitions the API adds (ToolTokens); an
	// Unbounded call's is bounded by its model's context window instead
	// (see Bound).
	Input int64
	// Output bounds each call's output tokens.
	Output int64
}

// Bound is the most est could cost, in micro-dollars: every input token at
// the dearest input rate of its model (uncached or written to a cache),
// every output token at its output rate, at the long-context rates when
// the input bound is over their threshold, times the model's multiplier
// of the geography the call asks its inference to run in (Price.GeoUS,
// as Cost charges it; a call that names none at GeoUS, since the
// workspace's default geography may be the US, and its usage says so),
// and every web search at its price. A model the table does not name is bounded at the price it is
// charged at (Prices.Resolve: its family's newest model, or UnpricedAs), so
// that what is reserved bounds what is charged; a model not known at all
// (est.Model "": its body was not read) at the dearest rates of any model.
// An Unbounded call's input is bounded by its model's context window
// (Price.Context; Context1M when the call asks for the 1M window, or its
// model is not in the table), and it is bounded for each of its Rounds;
// any other call's input is est.Input. Neither is more than the model's
// window when the table holds the model (a model it does not hold may
// take more).
func (m *Meter) Bound(est Estimate) int64 {
	if est.Calls <= 0 {
		return 0
	}
	p, exact := m.cfg.Prices.dearest, false
	if est.Model != "" {
		res := m.cfg.Prices.Resolve(est.Model)
		p, exact = res.Price, res.Match == Exact
	}
	window := p.Context
	if window <= 0 || est.Context1M || !exact {
		window = max(window, Context1M)
	}
	in, rounds := est.Input, int64(1)
	if est.Unbounded {
		in, rounds = max(in, window), max(est.Rounds, 1)
	}
	if exact {
		// The API refuses, unbilled, a call whose input is over its
		// model's window.
		in = min(in, window)
	}
	r := p.rates(Tokens{Input: in})
	per := float64(rounds)*(float64(in)*max(r.Input, r.CacheWrite, r.CacheWrite1h)+float64(est.Output)*r.Output)*p.geoBound(est.Geo) +
		float64(max(est.Searches, 0))*p.WebSearch*1000
	return max(micros(per*float64(est.Calls)), 1)
}

// inputBound bounds the input tokens of a body of n bytes.
func inputBound(n int64) int64 { return (n+BytesPerToken-1)/BytesPerToken + OverheadTokens }

// EstimateOf is the Estimate of a request whose capability estimated it
// as e, from a body of n bytes, or of e.InputBytes when its calls send
// more; maxTokens bounds the output of a call whose max_tokens e does
// not cap.
func EstimateOf(e capability.Estimate, n, maxTokens int64) Estimate {
	out := e.MaxTokens
	if !e.Capped {
		out = max(out, maxTokens)
	}
	return Estimate{Estimate: e, Input: inputBound(max(n, e.InputBytes)) + max(e.ToolTokens, 0), Output: out}
}
