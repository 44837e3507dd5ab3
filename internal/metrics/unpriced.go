package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxUnpricedModels bounds boxbroker_unpriced_calls_total's model label:
// the first MaxUnpricedModels models seen are named, and every later one
// is counted as "other".
const MaxUnpricedModels = 100

// unpriced counts calls of models the price table does not name.
type unpriced struct {
	calls *prometheus.CounterVec
	// mu guards seen, the models named in the model label so far.
	mu   sync.Mutex
	seen map[string]bool
}

func newUnpriced() *unpriced {
	return &unpriced{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "boxbroker_unpriced_calls_total",
			Help: "Model calls whose model the price table does not name, by model (the first 100 seen; later ones as other), the table's model they were charged as (priced_as), and match: family (priced as the newest model of its family) or unpriced (as --unpriced-as, the dearest model by default).",
		}, []string{"model", "priced_as", "match"}),
		seen: map[string]bool{},
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
	u := m.unpriced
	u.mu.Lock()
	if !u.seen[model] {
		if len(u.seen) >= MaxUnpricedModels {
			model = "other"
		} else {
			u.seen[model] = true
		}
	}
	u.mu.Unlock()
	if match != "family" {
		match = "unpriced"
	}
	u.calls.WithLabelValues(model, pricedAs, match).Inc()
}
