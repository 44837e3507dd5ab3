package capability

import "net/http"

// Metered is implemented by a capability whose requests make model calls
// that are paid for, measured and held to budgets (package spend wraps
// it). The capability reads its own requests; the meter decides when to
// read them, what to reserve and what to charge.
type Metered interface {
	Capability
	// MeterBody reports whether r may make model calls (ok false: it is
	// not metered), and the most bytes of its body Estimate reads.
	MeterBody(r *http.Request) (limit int64, ok bool)
	// Estimate bounds the model calls r makes from body, r's whole body,
	// or from r alone when body is nil: r's body is over the limit, or
	// was not read whole. The zero Estimate (Calls 0) means r makes no
	// model call (the capability refuses it without asking one, say),
	// and r is not metered. Estimate must not read r.Body; body is not
	// kept past the call.
	Estimate(r *http.Request, body []byte) Estimate
}

// Estimate is what a metered capability knows of a request's model calls
// before they are made.
type Estimate struct {
	// Model is the model the calls name; "" when not known, and the
	// calls are bounded at the dearest rates of any model.
	Model string
	// Calls is the most upstream model calls the request makes.
	Calls int64
	// MaxTokens bounds each call's output tokens when Capped is true.
	// When Capped is false the request does not bound them for certain
	// (its max_tokens was not read), and the meter's own bound applies
	// when it is larger than MaxTokens.
	MaxTokens int64
	Capped    bool
	// Unbounded is true when the calls take input that the request does
	// not hold, so that its size does not bound their input: the API
	// fetches it (an image or document source by URL or file ID), makes
	// it (a server tool's results, an MCP server's), or counts it by
	// pixels and pages, not bytes (a base64 image or PDF). Such a call's input
	// is bounded only by the model's context window, in each of Rounds
	// samplings.
	Unbounded bool
	// Context1M is true when the request asks for the 1M-token context
	// window (a beta naming context-1m-..., in the anthropic-beta
	// header or the body's anthropic_beta).
	Context1M bool
	// ToolTokens is input each call takes that the request's bytes do
	// not hold: the definitions of the Anthropic-defined tools it names
	// (bash, text_editor, computer, memory), which the API writes into
	// the prompt from their type alone.
	ToolTokens int64
	// Geo is the geography the request asks the calls' inference to run
	// in (a Messages body's inference_geo): "us", which the API prices at
	// a multiple of the model's rates, or "global", at the standard ones.
	// "" names none: the calls run in the workspace's default geography,
	// which may be the US, and are bounded at the model's multiplier.
	Geo string
	// InputBytes, when over 0, is the most bytes of one call's Messages
	// body as the capability writes it, when that is not the request's
	// own body: decide writes a body of its own for each question, with
	// an output schema and indented criteria and state that may run to
	// many times the request's bytes. Each call's input is bounded by
	// the larger of it and the request's size.
	InputBytes int64
	// Rounds is the most times the API samples the model within one call:
	// once, and once more for each server tool use (the tools' max_uses).
	// Zero means once.
	Rounds int64
	// Searches is the most web searches one call makes (the web search
	// tools' max_uses), each priced apart from tokens.
	Searches int64
	// Unboundable, when not "", says why nothing in the request bounds
	// what its calls can cost (a server tool with no max_uses): a payer
	// held to a budget is refused such a call, with this reason.
	Unboundable string
}
