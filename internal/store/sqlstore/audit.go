package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// pruneChunk bounds the rows one pruning transaction deletes, so that
// pruning a long log never holds a lock for long.
const pruneChunk = 5000

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
		where = append(where, "at >= "+arg(s.D.Time(q.Since)))
	}
	if q.RefusalsOnly {
		where = append(where, "reason <> ''")
	}
	query := "SELECT " + s.auditColumns() + " FROM audit"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY at DESC, id DESC LIMIT " + arg(q.Limit)
	return collect(ctx, s, "list audit", query, scanAudit, args...)
}

// auditColumns are an entry's columns as scanAudit reads them.
func (s *Store) auditColumns() string {
	return "id, box, at, method, route, capability, " + s.D.WordsJSON("words") +
		", status, reason, message, duration_us, upstream_status, paid_by, bytes, cost_micros"
}

func scanAudit(r Scanner) (store.AuditEntry, error) {
	var e store.AuditEntry
	var dur int64
	var words string
	if err := r.Scan(&e.ID, &e.Box, Time(&e.At), &e.Method, &e.Route, &e.Capability, &words, &e.Status, &e.Reason, &e.Message,
		&dur, &e.UpstreamStatus, &e.PaidBy, &e.Bytes, &e.Cost); err != nil {
		return e, err
	}
	e.Duration = time.Duration(dur) * time.Microsecond
	var err error
	if e.Words, err = decodeWords(words); err != nil {
		return e, fmt.Errorf("entry %d: %w", e.ID, err)
	}
	return e, nil
}

// PruneAudit forgets entries before before, a chunk per transaction, and
// says how many it removed.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.Write(ctx, "prune audit", func(tx *sql.Tx) ([]store.Change, error) {
			var err error
			n, err = affected(ctx, tx, "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < $1 LIMIT $2)", s.D.Time(before), pruneChunk)
			return nil, err
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < pruneChunk {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("prune audit: %w", err)
		}
	}
}
