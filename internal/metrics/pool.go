package metrics

import "github.com/prometheus/client_golang/prometheus"

// PoolCounts are a replica's counts of one entry of the operator's
// credential pool since the process began: the calls made on it, those
// it refused 429, 529 (or overloaded_error) and 401 or 403 (Failures),
// and those made again on another entry after it refused them.
type PoolCounts struct {
	Requests, R429, R529, Failovers, Failures int64
}

// PoolEntry is what a replica knows of one entry of the operator's
// credential pool, for its metrics: its counts, and whether it is cooling
// or failed now. Name is the operator's name for the entry, never its
// value; there are as many as entries.
type PoolEntry struct {
	Name string
	PoolCounts
	Cooling, Failed bool
}

var (
	poolRequests  = prometheus.NewDesc("boxbroker_pool_requests_total", "Upstream calls made on each entry of the operator's credential pool, by entry name.", []string{"entry"}, nil)
	poolRefusals  = prometheus.NewDesc("boxbroker_pool_refusals_total", "Calls an entry of the pool was refused, by entry and status: 429, 529 (529 and 5xx overloaded_error), and auth (401 and 403).", []string{"entry", "status"}, nil)
	poolFailovers = prometheus.NewDesc("boxbroker_pool_failovers_total", "Calls made again on another entry after this entry refused them.", []string{"entry"}, nil)
	poolState     = prometheus.NewDesc("boxbroker_pool_entry_state", "1 for an entry's state on this replica (healthy, cooling, failed), 0 for the others.", []string{"entry", "state"}, nil)
)

// poolCollector reads the pool at each scrape.
type poolCollector struct{ read func() []PoolEntry }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolRequests
	ch <- poolRefusals
	ch <- poolFailovers
	ch <- poolState
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.read() {
		ch <- prometheus.MustNewConstMetric(poolRequests, prometheus.CounterValue, float64(e.Requests), e.Name)
		ch <- prometheus.MustNewConstMetric(poolRefusals, prometheus.CounterValue, float64(e.R429), e.Name, "429")
		ch <- prometheus.MustNewConstMetric(poolRefusals, prometheus.CounterValue, float64(e.R529), e.Name, "529")
		ch <- prometheus.MustNewConstMetric(poolRefusals, prometheus.CounterValue, float64(e.Failures), e.Name, "auth")
		ch <- prometheus.MustNewConstMetric(poolFailovers, prometheus.CounterValue, float64(e.Failovers), e.Name)
		for _, s := range []struct {
			name string
			on   bool
		}{{"healthy", !e.Cooling && !e.Failed}, {"cooling", e.Cooling}, {"failed", e.Failed}} {
			v := 0.0
			if s.on {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(poolState, prometheus.GaugeValue, v, e.Name, s.name)
		}
	}
}

// Pool registers read, called at each scrape, as the source of the
// credential pool's metrics. It is called once, before serving.
func (m *Metrics) Pool(read func() []PoolEntry) {
	if m == nil || read == nil {
		return
	}
	m.reg.MustRegister(poolCollector{read: read})
}
