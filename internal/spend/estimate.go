package spend

import (
	"github.com/intentius/boxbroker/internal/capability"
)

// Estimate is what the broker knows of a request before it is forwarded:
// its model ("" when unknown) and, for each of Calls upstream calls, a
// bound on its input and output tokens.
type Estimate struct {
	Model  string
	Calls  int64
	Input  int64
	Output int64
	// Unbounded is true when the API fetches, makes or counts input of
	// its own (see capability.Estimate), so that Input does not bound it: each
	// call's input is bounded by the model's context window (Context1M:
	// the 1M window), in each of Rounds samplings (0: one).
	Unbounded bool
	Context1M bool
	Rounds    int64
	// Searches is the most web searches a call makes.
	Searches int64
	// Unboundable, when not "", is why nothing bounds the calls' cost:
	// a payer held to a budget is refused them (see Unboundable).
	Unboundable string
}

// Bound is the most est could cost, in micro-dollars: every input token at
// the dearest input rate of its model (uncached or written to a cache),
// every output token at its output rate, at the long-context rates when
// the input bound is over their threshold, and every web search at its
// price. A model the table does not name is bounded at the price it is
// charged at (Prices.Resolve: its family's newest model, or UnpricedAs), so
// that what is reserved bounds what is charged; a model not known at all
// (est.Model "": its body was not read) at the dearest rates of any model.
// An Unbounded call's input is bounded by its model's context window
// (Price.Context; Context1M when the call asks for the 1M window, or its
// model is not in the table), and it is bounded for each of its Rounds.
func (m *Meter) Bound(est Estimate) int64 {
	if est.Calls <= 0 {
		return 0
	}
	p, exact := m.cfg.Prices.dearest, false
	if est.Model != "" {
		res := m.cfg.Prices.Resolve(est.Model)
		p, exact = res.Price, res.Match == Exact
	}
	in, rounds := est.Input, int64(1)
	if est.Unbounded {
		window := p.Context
		if window <= 0 || est.Context1M || !exact {
			window = max(window, Context1M)
		}
		in, rounds = max(in, window), max(est.Rounds, 1)
	}
	r := p.rates(Tokens{Input: in})
	per := float64(rounds)*(float64(in)*max(r.Input, r.CacheWrite, r.CacheWrite1h)+float64(est.Output)*r.Output) +
		float64(max(est.Searches, 0))*p.WebSearch*1000
	return max(micros(per*float64(est.Calls)), 1)
}

// inputBound bounds the input tokens of a body of n bytes.
func inputBound(n int64) int64 { return (n+BytesPerToken-1)/BytesPerToken + OverheadTokens }

// EstimateOf is the Estimate of a request whose capability estimated it
// as e, from a body of n bytes; maxTokens bounds the output of a call
// whose max_tokens e does not cap.
func EstimateOf(e capability.Estimate, n, maxTokens int64) Estimate {
	out := e.MaxTokens
	if !e.Capped {
		out = max(out, maxTokens)
	}
	return Estimate{Model: e.Model, Calls: e.Calls, Input: inputBound(n), Output: out,
		Unbounded: e.Unbounded, Context1M: e.Context1M, Rounds: e.Rounds, Searches: e.Searches, Unboundable: e.Unboundable}
}
