package spend

import (
	"io"
	"sync"
)

// StreamOnce is streamOnce, for the external benchmarks.
var StreamOnce = streamOnce

// ReportMedians is reportMedians, for the external benchmarks.
var ReportMedians = reportMedians

// ObserveJSON reads body, a JSON answer, to its end through an observer,
// buf a read, closes it, and returns the model and whether the usage was
// read.
func ObserveJSON(body io.ReadCloser, buf []byte) (model string, measured bool) {
	var mu sync.Mutex
	r := &reading{open: true}
	o := &observer{body: body, mu: &mu, r: r, bufs: &benchBufs}
	for {
		if _, err := o.Read(buf); err != nil {
			break
		}
	}
	_ = o.Close()
	return r.model, r.measured
}

// benchBufs is ObserveJSON's pool of buffers, as a Meter's.
var benchBufs bufPool

// Touched reports whether box is marked charged, to be looked at in the
// Alerter's next round.
func (a *Alerter) Touched(box string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.dirty[box]
	return ok
}
