package store

import (
	"context"
	"time"
)

// SpooledKeep is how long the key of a batch applied is kept, by the
// store's clock, not a replica's: a spool is replayed within seconds of
// the store's answering again and at every start, so a batch replayed
// later than this is of a replica whose data directory lay unused for a
// month.
const SpooledKeep = 30 * 24 * time.Hour

// Spooled applies the batches a replica kept in its spool while the
// store could not take them (package outbox), each exactly once.
type Spooled interface {
	// ApplySpooled writes one spooled batch — its settlements, each as
	// Settle writes one, and its audit entries — in one transaction,
	// together with its key, unless a batch with that key was applied
	// already; it reports whether it applied the batch now. A
	// settlement of a box removed since (or of a box another than its
	// BoxCreated names) is dropped.
	ApplySpooled(ctx context.Context, key string, settle []Settlement, audit []AuditEntry) (bool, error)
}
