package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxUnpricedModels bounds boxbroker_unpriced_calls_total's model label:
// the first MaxUnpricedModels models seen are named, and every later one
// is counted as "other".
const MaxUnpricedModels = 100

// unpriced counts calls of models the price table does not name.
type unpriced struct {
	calls  *prometheus.CounterVec
	models labelSet // the models named in the model label so far
}

func newUnpriced() *unpriced {
	return &unpriced{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boxbroker_unpriced_calls_total",
			Help: "Model calls whose model the price table does not name, by model (the first 100 seen; later ones as other), the table's model they were charged as (priced_as), and match: family (priced as the newest model of its family) or unpriced (as --unpriced-as, the dearest model by default).",
		}, []string{"model", "priced_as", "match"}),
		models: labelSet{max: MaxUnpricedModels, seen: map[string]bool{}},
	}
}

// UnpricedCall counts one call of a model the price table does not name,
// charged at the price of the table's model pricedAs; match is "family"
// or "unpriced" (any other value is counted as "unpriced").
func (m *Metrics) UnpricedCall(model, pricedAs, match string) {
	if m == nil || m.unpriced == nil {
		return
	}
	model, pricedAs = strings.ToValidUTF8(model, "?"), strings.ToValidUTF8(pricedAs, "?")
	if match != "family" {
		match = "unpriced"
	}
	m.unpriced.calls.WithLabelValues(m.unpriced.models.label(model), pricedAs, match).Inc()
}
