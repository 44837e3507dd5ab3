package store

import (
	"context"
	"time"
)

// Leases keeps reservations as leases: a running broker renews the
// reservations of its calls in flight, and ReleaseStale frees those no
// one renewed, so a replica that crashed mid-call holds its callers'
// budgets only until its leases run out.
type Leases interface {
	// RenewReservations sets the time of each reservation in ids still
	// held to at; those already released are skipped.
	RenewReservations(ctx context.Context, ids []int64, at time.Time) error
}
