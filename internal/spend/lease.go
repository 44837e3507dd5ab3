package spend

import (
	"context"
	"time"
)

// renew renews the leases of this process's calls in flight.
func (m *Meter) renew(ctx context.Context) {
	m.liveMu.Lock()
	ids := make([]int64, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	m.liveMu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := m.cfg.Settle.RenewReservations(ctx, ids, m.cfg.Now()); err != nil && ctx.Err() == nil {
		m.log.Warn("spend: reservations of calls in flight not renewed; they are released if no renewal succeeds within their lease",
			"count", len(ids), "lease", m.cfg.StaleAfter.String(), "err", err)
	}
}

// Run renews the reservations of this process's calls in flight, and
// releases stale reservations — those no process renewed within their
// lease, as a process that ended mid-call leaves them — now and every
// sixth of the lease, until ctx ends.
func (m *Meter) Run(ctx context.Context) {
	every := min(m.cfg.StaleAfter/6, 10*time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.renew(ctx)
		n, err := m.cfg.Settle.ReleaseStale(ctx, m.cfg.Now().Add(-m.cfg.StaleAfter))
		switch {
		case err != nil && ctx.Err() == nil:
			m.log.Warn("spend: stale reservations not released", "err", err)
		case n > 0:
			m.log.Warn("spend: released stale reservations", "count", n, "older_than", m.cfg.StaleAfter.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
