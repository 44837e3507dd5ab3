package spend

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// MaxClockSkew is how far this process's clock may be from the store's
// before MeasureClock warns and ClockSkew reports it: leases are stamped
// and judged by the store's clock whatever the skew, but budget months,
// grants' expiry and log times are told by this process's own.
const MaxClockSkew = 5 * time.Second

// storeClock is the store's clock's offset from Config.Now, as last
// measured.
type storeClock struct {
	offset   atomic.Int64 // store's clock − Now, in nanoseconds
	measured atomic.Bool  // whether a measurement has succeeded
	mu       sync.Mutex   // guards warned
	warned   bool         // whether the skew past MaxClockSkew was logged
}

// MeasureClock reads the store's clock (Config.StoreClock) and keeps its
// offset from Now, taking the middle of the round trip as the moment it
// was read. Past MaxClockSkew it logs one warning, and another only once
// the skew has come back within it and gone past it again. It does
// nothing without a StoreClock.
func (m *Meter) MeasureClock(ctx context.Context) error {
	if m.cfg.StoreClock == nil {
		return nil
	}
	t0 := m.cfg.Now()
	at, err := m.cfg.StoreClock(ctx)
	if err != nil {
		return err
	}
	t1 := m.cfg.Now()
	off := at.Sub(t0.Add(t1.Sub(t0) / 2))
	m.clock.offset.Store(int64(off))
	m.clock.measured.Store(true)
	far := off > MaxClockSkew || off < -MaxClockSkew
	m.clock.mu.Lock()
	warn := far && !m.clock.warned
	m.clock.warned = far
	m.clock.mu.Unlock()
	if warn {
		m.log.Warn("clock: this replica's clock is far from the store's; reservation leases are judged by the store's clock, "+
			"but budget months, grants' expiry and log times by this one's: keep every replica's clock in sync with the store's (NTP)",
			"skew", skewString(-off), "bound", MaxClockSkew.String())
	}
	return nil
}

// ClockSkew is how far this process's clock is ahead of the store's
// (negative: behind), as last measured, and whether a measurement has
// succeeded; 0, false without a StoreClock.
func (m *Meter) ClockSkew() (time.Duration, bool) {
	return -time.Duration(m.clock.offset.Load()), m.clock.measured.Load()
}

// skewString says d, a clock's skew from the store's, in words.
func skewString(d time.Duration) string {
	if d < 0 {
		return (-d).Round(time.Millisecond).String() + " behind"
	}
	return d.Round(time.Millisecond).String() + " ahead"
}

// renew renews the leases of this process's calls in flight, to the
// store's clock.
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
	if err := m.cfg.Settle.RenewReservations(ctx, ids, time.Time{}); err != nil && ctx.Err() == nil {
		m.log.Warn("spend: reservations of calls in flight not renewed; they are released if no renewal succeeds within their lease",
			"count", len(ids), "lease", m.cfg.StaleAfter.String(), "err", err)
	}
}

// Run renews the reservations of this process's calls in flight, and
// releases stale reservations — those no process renewed within their
// lease, as a process that ended mid-call leaves them — now and every
// sixth of the lease, until ctx ends. Reservations are stamped, renewed
// and judged by the store's clock, in its own statements: a replica whose
// clock steps back or ahead, even between two of its measurements, has
// none of its own released early nor releases another's. With a
// StoreClock it measures the store's clock first each time, for
// ClockSkew and its warning.
func (m *Meter) Run(ctx context.Context) {
	every := min(m.cfg.StaleAfter/6, 10*time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.tend(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tend is one round of Run.
func (m *Meter) tend(ctx context.Context) {
	if err := m.MeasureClock(ctx); err != nil && ctx.Err() == nil {
		m.log.Debug("spend: the store's clock not read", "err", err)
	}
	m.renew(ctx)
	n, err := m.cfg.Settle.ReleaseExpired(ctx, m.cfg.StaleAfter)
	switch {
	case err != nil && ctx.Err() == nil:
		m.log.Warn("spend: stale reservations not released", "err", err)
	case n > 0:
		m.log.Warn("spend: released stale reservations", "count", n, "older_than", m.cfg.StaleAfter.String())
	}
}
