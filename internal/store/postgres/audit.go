package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// pruneChunk bounds the rows one pruning statement deletes, so that
// pruning a long log never holds locks for long.
const pruneChunk = 5000

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
	return s.write(ctx, fmt.Sprintf("add %d audit entries", len(entries)), func(tx pgx.Tx) ([]store.Change, error) {
		if err := unsynced(ctx, tx); err != nil {
			return nil, err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"audit"}, auditColumns, &auditRows{entries: entries, i: -1})
		return nil, err
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

// ListAudit returns the entries q selects, newest first (by time, then
// by ID). q.Limit must be positive.
func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("list audit: limit %d is not positive", q.Limit)
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.Box != "" {
		where = append(where, "box = "+arg(q.Box))
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= "+arg(q.Since))
	}
	if q.RefusalsOnly {
		where = append(where, "reason <> ''")
	}
	query := "SELECT id, box, at, method, route, capability, words, status, reason, message, duration_us, upstream_status, paid_by, bytes, cost_micros FROM audit"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY at DESC, id DESC LIMIT " + arg(q.Limit)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, translate("list audit", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AuditEntry, error) {
		var e store.AuditEntry
		var dur int64
		err := r.Scan(&e.ID, &e.Box, &e.At, &e.Method, &e.Route, &e.Capability, &e.Words, &e.Status, &e.Reason, &e.Message, &dur, &e.UpstreamStatus, &e.PaidBy, &e.Bytes, &e.Cost)
		e.At = e.At.UTC()
		e.Duration = time.Duration(dur) * time.Microsecond
		if len(e.Words) == 0 {
			e.Words = nil
		}
		return e, err
	})
	if err != nil {
		return nil, translate("list audit", err)
	}
	return out, nil
}

// PruneAudit forgets entries before before, a chunk per statement, and
// says how many it removed.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < $1 LIMIT $2)", before, pruneChunk)
		if err != nil {
			return total, translate("prune audit", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneChunk {
			return total, nil
		}
	}
}
