package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// auditChunkLog sets auditChunk, the most rows one INSERT statement
// writes: 128 rows of auditColumns parameters each stay far below
// SQLite's limit on a statement's parameters (32766), and one statement
// for many rows spares the per-statement cost of the driver and of
// database/sql, which was most of the cost of an entry.
const (
	auditChunkLog = 7
	auditChunk    = 1 << auditChunkLog
)

// auditColumns is how many values an audit row takes.
const auditColumns = 14

// auditStmts are the writer connection's prepared INSERT statements of
// audit rows, prepared as first needed (auditor.Ready) and closed with
// the connection: ins[k] inserts 1<<k rows. A batch is written
// auditChunk rows a statement, then what remains a power of two at a
// time, so that a few statements serve every batch size and none is
// parsed again.
type auditStmts struct {
	mu  sync.Mutex // guards ins
	ins [auditChunkLog + 1]*sql.Stmt
}

// auditInsert is the statement that inserts rows audit rows.
func auditInsert(rows int) string {
	const head = "INSERT INTO audit (box, at, method, route, capability, words, status, reason, message, duration_us, upstream_status, paid_by, bytes, cost_micros) VALUES "
	const row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	var b strings.Builder
	b.Grow(len(head) + rows*(len(row)+2))
	b.WriteString(head)
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// auditChunks is the sizes, in order, of the statements that write n
// rows: auditChunk as often as it fits, then the powers of two that make
// up the rest, largest first.
func auditChunks(n int) []int {
	sizes := make([]int, 0, n/auditChunk+auditChunkLog)
	for ; n >= auditChunk; n -= auditChunk {
		sizes = append(sizes, auditChunkLog)
	}
	for k := auditChunkLog - 1; k >= 0; k-- {
		if n&(1<<k) != 0 {
			sizes = append(sizes, k)
		}
	}
	return sizes
}

// AddAudit stores entries in one transaction, auditChunk rows a statement
// at most, committed without waiting for the disk (see writeUnsynced):
// the log is already best-effort (the writer drops and counts entries
// when its queue is full), and an fsync a batch was the largest part of
// its cost. The audit log is never cached, so no change is recorded.
func (s *Store) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	if len(entries) == 0 {
		return nil
	}
	op := fmt.Sprintf("add %d audit entries", len(entries))
	a := auditor{s}
	if err := a.Ready(ctx, len(entries)); err != nil {
		return translate(op, err)
	}
	return s.writeUnsynced(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		return nil, a.In(ctx, tx, entries)
	})
}

// auditor writes audit rows in a write transaction (AddAudit's, or a
// group's for a spooled batch: it is the Store's sqlstore.Auditor).
type auditor struct{ s *Store }

// Ready prepares the statements that write n rows, those not prepared
// yet. It must be called outside a write transaction: it prepares on the
// writer's only connection.
func (a auditor) Ready(ctx context.Context, n int) error {
	a.s.audit.mu.Lock()
	defer a.s.audit.mu.Unlock()
	for _, k := range auditChunks(n) {
		if a.s.audit.ins[k] == nil {
			st, err := a.s.w.PrepareContext(ctx, auditInsert(1<<k))
			if err != nil {
				return err
			}
			a.s.audit.ins[k] = st
		}
	}
	return nil
}

// In writes entries in tx, auditChunk rows a statement at most, through
// the statements prepared so far (by Ready): one of a size not prepared
// yet runs unprepared, as none can be prepared on the one write
// connection while its transaction is open.
func (a auditor) In(ctx context.Context, tx *sql.Tx, entries []store.AuditEntry) error {
	a.s.audit.mu.Lock()
	stmts := a.s.audit.ins
	a.s.audit.mu.Unlock()
	args := make([]any, 0, min(len(entries), auditChunk)*auditColumns)
	var words []byte
	var prev auditArgs
	rest := entries
	for _, k := range auditChunks(len(entries)) {
		chunk := rest[:1<<k]
		rest = rest[len(chunk):]
		args = args[:0]
		for i := range chunk {
			e := &chunk[i]
			words = appendWords(words[:0], e.Words)
			args = prev.append(args, e, words)
		}
		var err error
		if st := stmts[k]; st != nil {
			_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, auditInsert(1<<k), args...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// auditArgs is the previous entry's values, boxed as statement arguments:
// a batch's entries mostly repeat a box, route and scope, and reusing a
// value boxed already spares an allocation per column.
type auditArgs struct {
	box, method, route, capability, reason, message boxed
	words                                           any
	wordsS                                          []byte
}

// boxed is a string boxed as a statement argument, and the string.
type boxed struct {
	v any
	s string
}

// of is s boxed: b's value when it boxes s already, else s boxed anew.
func (b *boxed) of(s string) any {
	if b.v == nil || s != b.s {
		b.v, b.s = s, s
	}
	return b.v
}

// append appends e's values to args in the columns' order, words being
// e.Words encoded.
func (p *auditArgs) append(args []any, e *store.AuditEntry, words []byte) []any {
	if p.words == nil || string(words) != string(p.wordsS) {
		p.words, p.wordsS = string(words), append(p.wordsS[:0], words...)
	}
	return append(args, p.box.of(e.Box), sqlstore.Micros(e.At), p.method.of(e.Method), p.route.of(e.Route), p.capability.of(e.Capability), p.words,
		int64(e.Status), p.reason.of(e.Reason), p.message.of(e.Message), e.Duration.Microseconds(), int64(e.UpstreamStatus), e.PaidBy, e.Bytes, e.Cost)
}

// appendWords appends words as encoding/json writes them (nil as []): a
// word of printable ASCII that JSON need not escape is copied as is, any
// other is left to encoding/json, so that the text is the same either
// way.
func appendWords(b []byte, words []string) []byte {
	b = append(b, '[')
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		if plainJSON(w) {
			b = append(b, '"')
			b = append(b, w...)
			b = append(b, '"')
			continue
		}
		q, _ := json.Marshal(w) // a string always encodes
		b = append(b, q...)
	}
	return append(b, ']')
}

// plainJSON reports whether encoding/json writes s between quotes as it
// is: printable ASCII with no quote, backslash or HTML character.
func plainJSON(s string) bool {
	for i := range len(s) {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
