package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// auditColumns are the columns AddAudit fills, in auditRows' order.
var auditColumns = []string{"box", "at", "method", "route", "capability", "words", "status", "reason", "message",
	"duration_us", "upstream_status", "paid_by", "bytes", "cost_micros"}

// AddAudit stores entries in one transaction, by COPY, committed without
// waiting for the disk (see unsynced). The audit log is never cached, so
// no change is recorded.
func (s *Store) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.write(ctx, fmt.Sprintf("add %d audit entries", len(entries)), func(tx pgx.Tx) error {
		if err := unsynced(ctx, tx); err != nil {
			return err
		}
		return spendTx{tx}.AddAudit(ctx, entries)
	})
}

// unsynced lets tx commit without waiting for its WAL to reach the disk
// (synchronous_commit off, for this transaction only), as the SQLite
// store's audit batches commit at synchronous=NORMAL: the audit log is
// best-effort already, and a server crash may lose its last batches,
// never corrupt anything. Every other write still waits.
func unsynced(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, "SET LOCAL synchronous_commit TO off")
	return err
}

// auditRows is a pgx.CopyFromSource over audit entries. Values returns
// the same slice for every row, which CopyFrom encodes before it asks for
// the next.
type auditRows struct {
	entries []store.AuditEntry
	i       int
	values  [14]any
}

func (r *auditRows) Next() bool {
	r.i++
	return r.i < len(r.entries)
}

func (r *auditRows) Values() ([]any, error) {
	e := &r.entries[r.i]
	words := e.Words
	if words == nil {
		words = []string{}
	}
	r.values = [14]any{e.Box, e.At, e.Method, e.Route, e.Capability, words, e.Status, e.Reason, e.Message,
		e.Duration.Microseconds(), e.UpstreamStatus, e.PaidBy, e.Bytes, e.Cost}
	return r.values[:], nil
}

func (r *auditRows) Err() error { return nil }
