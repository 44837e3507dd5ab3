package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// pruneChunk bounds the rows one pruning transaction deletes, so that
// pruning a long log never holds the write lock for long.
const pruneChunk = 5000

// AddAudit stores entries in one transaction. The audit log is never
// cached, so no change is recorded.
func (s *Store) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	return s.write(ctx, fmt.Sprintf("add %d audit entries", len(entries)), func(tx *sql.Tx) ([]store.Change, error) {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit (box, at, method, route, capability, words, status, reason, message, duration_us, upstream_status)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return nil, err
		}
		defer stmt.Close()
		for _, e := range entries {
			words, err := json.Marshal(nonNil(e.Words))
			if err != nil {
				return nil, err
			}
			if _, err := stmt.ExecContext(ctx, e.Box, micros(e.At), e.Method, e.Route, e.Capability, string(words),
				e.Status, e.Reason, e.Message, e.Duration.Microseconds(), e.UpstreamStatus); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}

// ListAudit returns the entries q selects, newest first (by time, then
// by ID). q.Limit must be positive.
func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("list audit: limit %d is not positive", q.Limit)
	}
	var where []string
	var args []any
	if q.Box != "" {
		where = append(where, "box = ?")
		args = append(args, q.Box)
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, micros(q.Since))
	}
	if q.RefusalsOnly {
		where = append(where, "reason <> ''")
	}
	query := "SELECT id, box, at, method, route, capability, words, status, reason, message, duration_us, upstream_status FROM audit"
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY at DESC, id DESC LIMIT ?"
	args = append(args, q.Limit)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, translate("list audit", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		var e store.AuditEntry
		var at, dur int64
		var words string
		if err := rows.Scan(&e.ID, &e.Box, &at, &e.Method, &e.Route, &e.Capability, &words, &e.Status, &e.Reason, &e.Message, &dur, &e.UpstreamStatus); err != nil {
			return nil, translate("list audit", err)
		}
		e.At = fromMicros(at)
		e.Duration = time.Duration(dur) * time.Microsecond
		if err := json.Unmarshal([]byte(words), &e.Words); err != nil {
			return nil, fmt.Errorf("list audit: entry %d: words: %w", e.ID, err)
		}
		if len(e.Words) == 0 {
			e.Words = nil
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list audit", err)
	}
	return out, nil
}

// PruneAudit forgets entries before before, a chunk per transaction, and
// says how many it removed.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.write(ctx, "prune audit", func(tx *sql.Tx) ([]store.Change, error) {
			res, err := tx.ExecContext(ctx, "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ? LIMIT ?)", micros(before), pruneChunk)
			if err != nil {
				return nil, err
			}
			n, err = res.RowsAffected()
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
