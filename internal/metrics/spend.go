package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxModels bounds the distinct values of the model label of
// boxbroker_spend_usd_total and boxbroker_tokens_total: the first
// MaxModels models an upstream's answer named are counted under their
// own names, every other one under OtherModel (see Usage).
const MaxModels = 100

// Model label values besides a model's own name.
const (
	// OtherModel is the model label of a model past MaxModels, or of a
	// name that is not one (longer than 64 bytes, or holding a character
	// no model ID has, such as the "_" of a box's token).
	OtherModel = "other"
	// UnknownModel is the model label of a call whose model was not read.
	UnknownModel = "unknown"
)

// Token kinds, the values of boxbroker_tokens_total's kind label.
const (
	TokensInput      = "input"
	TokensOutput     = "output"
	TokensCacheRead  = "cache_read"
	TokensCacheWrite = "cache_write"
)

// payerKinds are the values of the payer label; any other is "other".
var payerKinds = map[string]bool{"shared": true, "owner": true, "visitor": true}

// MaxUnpricedModels bounds boxbroker_unpriced_calls_total's model label:
// the first MaxUnpricedModels models an upstream's answer named are
// named, and every other one is counted as "other" (see UnpricedCall).
const MaxUnpricedModels = 100

// spendMetrics counts what model calls measured, by model and payer kind
// (never by box: the labels stay bounded), and the calls of models the
// price table does not name.
type spendMetrics struct {
	usd      *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	models   labelSet // the model labels in use, at most MaxModels
	unpriced *prometheus.CounterVec
	// unpricedModels are the models named in unpriced's model label so far.
	unpricedModels labelSet
}

// labelSet bounds the values of a label: the first max values seen are
// named, and every later one is OtherModel.
type labelSet struct {
	max  int
	mu   sync.Mutex      // guards seen
	seen map[string]bool // the values named so far
}

// label is v when it is named, or is named now: take is true and fewer
// than max values are named. Otherwise it is OtherModel.
func (l *labelSet) label(v string, take bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[v] {
		return v
	}
	if !take || len(l.seen) >= l.max {
		return OtherModel
	}
	l.seen[v] = true
	return v
}

func newSpendMetrics(reg *prometheus.Registry) *spendMetrics {
	s := &spendMetrics{
		usd: counterVec("boxbroker_spend_usd_total",
			"Measured cost in US dollars of the model calls settled, as the spend meter priced them (an unmeasured or unpriced call adds only what was priced), by model and payer kind.",
			"model", "payer"),
		tokens: counterVec("boxbroker_tokens_total",
			"Tokens of the model calls settled, as the upstream's answers reported them, by model, payer kind and kind (input, output, cache_read, cache_write).",
			"model", "payer", "kind"),
		models: labelSet{max: MaxModels, seen: map[string]bool{}},
		unpriced: counterVec("boxbroker_unpriced_calls_total",
			"Model calls whose model the price table does not name, by model (the first 100 seen; later ones as other), the table's model they were charged as (priced_as), and match: family (priced as the newest model of its family) or unpriced (as --unpriced-as, the dearest model by default).",
			"model", "priced_as", "match"),
		unpricedModels: labelSet{max: MaxUnpricedModels, seen: map[string]bool{}},
	}
	reg.MustRegister(s.usd, s.tokens, s.unpriced)
	return s
}

// UnpricedCall counts one call of a model the price table does not name,
// charged at the price of the table's model pricedAs; match is "family"
// or "unpriced" (any other value is counted as "unpriced"). answered
// says an upstream's answer named model: only such a model takes one of
// the MaxUnpricedModels named places, so that a box naming a new model
// on each call whose answer named none (cut off, or encoded), or a name
// that is no model ID, cannot take them all and leave a real unpriced
// model counted as "other". A model named already is counted by its
// name however its call was read.
func (m *Metrics) UnpricedCall(model, pricedAs, match string, answered bool) {
	if m == nil {
		return
	}
	pricedAs = strings.ToValidUTF8(pricedAs, "?")
	if match != "family" {
		match = "unpriced"
	}
	label := OtherModel
	if modelID(model) {
		label = m.spend.unpricedModels.label(model, answered)
	}
	m.spend.unpriced.WithLabelValues(label, pricedAs, match).Inc()
}

// Usage counts the model calls of one settled request made with model
// and paid by a payer of kind payer: costMicros micro-dollars measured,
// and the tokens of each kind the answers reported. model is bounded
// (see MaxModels, OtherModel): answered says an upstream's answer named
// it, and only such a model takes one of the MaxModels named places, so
// that a box naming a new model on each call whose answer named none
// the broker read (cut off, or encoded) cannot take them all and leave
// the models it is really answered by counted as "other". A model named
// already is counted by its name however its call was read. A payer
// kind other than shared, owner or visitor is counted as "other".
func (m *Metrics) Usage(model, payer string, answered bool, costMicros, input, output, cacheRead, cacheWrite int64) {
	if m == nil {
		return
	}
	s := m.spend
	model = s.modelLabel(model, answered)
	if !payerKinds[payer] {
		payer = "other"
	}
	if costMicros > 0 {
		s.usd.WithLabelValues(model, payer).Add(float64(costMicros) / 1e6)
	} else {
		s.usd.WithLabelValues(model, payer) // exported at 0 once a model is seen
	}
	for _, k := range [...]struct {
		kind string
		n    int64
	}{{TokensInput, input}, {TokensOutput, output}, {TokensCacheRead, cacheRead}, {TokensCacheWrite, cacheWrite}} {
		if k.n > 0 {
			s.tokens.WithLabelValues(model, payer, k.kind).Add(float64(k.n))
		}
	}
}

// modelLabel is model's label: itself when it reads as a model ID and is
// named (one of the first MaxModels an answer named: answered), else
// OtherModel (UnknownModel for "").
func (s *spendMetrics) modelLabel(model string, answered bool) string {
	if model == "" {
		return UnknownModel
	}
	if !modelID(model) {
		return OtherModel
	}
	return s.models.label(model, answered)
}

// modelID reports whether s reads as a model ID, as Anthropic, Bedrock
// and Vertex name them (claude-sonnet-4-5-20250929,
// anthropic.claude-3-5-sonnet-20240620-v1:0, claude-3-5-sonnet-v2@20241022):
// at most 64 bytes of letters, digits and . : @ / -. A box's token (bbx_…)
// holds "_", so a model field a box filled with one is never a label.
func modelID(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.' || c == ':' || c == '@' || c == '/' || c == '-':
		default:
			return false
		}
	}
	return true
}
