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

// auditRows is entries as COPY reads them. Each row's values are made
// in the same array, which COPY encodes before it asks for the next.
func auditRows(entries []store.AuditEntry) pgx.CopyFromSource {
	var values [14]any
	return pgx.CopyFromSlice(len(entries), func(i int) ([]any, error) {
		e := &entries[i]
		values = [14]any{e.Box, e.At, e.Method, e.Route, e.Capability, dialect{}.Words(e.Words), e.Status, e.Reason, e.Message,
			e.Duration.Microseconds(), e.UpstreamStatus, e.PaidBy, e.Bytes, e.Cost}
		return values[:], nil
	})
}
