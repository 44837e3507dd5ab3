// Package spendsql is the budget algorithm of both SQL stores, written
// once: the reservation of a call's cost against its budgets, the
// release of a reservation, and a call's settlement (see store.Spend).
// Each store runs it inside its own transaction, through Tx.
//
// Its SQL is the dialect SQLite and PostgreSQL share: $N placeholders
// (modernc.org/sqlite binds $N by number, as pgx does), CASE where one
// would write max(a, b) in SQLite and GREATEST(a, b) in PostgreSQL,
// RETURNING, and ON CONFLICT … DO UPDATE naming the table of the row it
// updates (PostgreSQL finds a bare column name ambiguous beside
// excluded). A time is passed as Tx.Time makes it: microseconds in
// SQLite, a timestamptz in PostgreSQL.
//
// The reservation is one conditional UPDATE per budget (spent + reserved
// + amount must not pass the limit), never a read and then a write; in
// PostgreSQL a concurrent Reserve on the same tally waits for this one's
// row lock and then evaluates its condition against the committed row.
// Tallies are always touched in the order principals gives: the box's
// own, then the principal's; a batch of settlements (SettleMany) charges
// its tallies, and adds to its usage and prompt-cache rows, in the order
// of their keys, so that replicas writing batches at once lock them in
// the same order.
package spendsql

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// Tx is one store's transaction (or, for Budgeted, any of its
// connections), as the algorithm uses it.
type Tx interface {
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query whose first row the result's Scan reads;
	// Scan returns store.ErrNotFound when there is no row, and the
	// driver's other errors as they are.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Each runs a query and calls row with each row of its answer, in
	// order, stopping at row's first error, which it returns.
	Each(ctx context.Context, query string, args []any, row func(Row) error) error
	// Time is t in the form the store keeps a time in.
	Time(t time.Time) any
}

// Row is one row of a query's answer.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a query's answer as a Tx's Each reads it: *sql.Rows and
// pgx.Rows are both one.
type Rows interface {
	Row
	Next() bool
	Err() error
}

// EachRow calls row with each of rows, in order, stopping at row's first
// error, which it returns, else rows' own; the caller closes rows. A Tx's
// Each is its query and EachRow.
func EachRow(rows Rows, row func(Row) error) error {
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Stmt is a statement and its arguments.
type Stmt struct {
	Query string
	Args  []any
}

// Batcher is a Tx that runs statements whose answers are not read in
// one exchange with its server (pgx's Batch), in order, stopping at the
// first error. A settlement's upserts go through it when Tx is one.
type Batcher interface {
	ExecAll(ctx context.Context, stmts []Stmt) error
}

// The statements a settlement runs; see Statements.
const (
	boxThere      = "SELECT 1 FROM boxes WHERE name = $1"
	releaseDelete = "DELETE FROM reservations WHERE id = $1 RETURNING box, principal, month, amount"
	releaseUpdate = `UPDATE tallies SET reserved = CASE WHEN reserved > $1 THEN reserved - $1 ELSE 0 END
		WHERE box = $2 AND principal = $3 AND month = $4`
	tallyUpsert = `INSERT INTO tallies (box, principal, month, spent) VALUES ($1, $2, $3, $4)
		ON CONFLICT (box, principal, month) DO UPDATE SET spent = tallies.spent + excluded.spent`
	usageUpsert = `INSERT INTO usage (box, month, payer_kind, principal, model, calls, unpriced, unmeasured,
			input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (box, month, payer_kind, principal, model) DO UPDATE SET
			calls = usage.calls + excluded.calls, unpriced = usage.unpriced + excluded.unpriced,
			unmeasured = usage.unmeasured + excluded.unmeasured,
			input_tokens = usage.input_tokens + excluded.input_tokens, output_tokens = usage.output_tokens + excluded.output_tokens,
			cache_write_tokens = usage.cache_write_tokens + excluded.cache_write_tokens,
			cache_read_tokens = usage.cache_read_tokens + excluded.cache_read_tokens, cost = usage.cost + excluded.cost`
	cacheUpsert = `INSERT INTO cache_usage (box, month, payer_kind, entry, calls, input_tokens, cache_write_tokens, cache_read_tokens)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (box, month, payer_kind, entry) DO UPDATE SET
			calls = cache_usage.calls + excluded.calls, input_tokens = cache_usage.input_tokens + excluded.input_tokens,
			cache_write_tokens = cache_usage.cache_write_tokens + excluded.cache_write_tokens,
			cache_read_tokens = cache_usage.cache_read_tokens + excluded.cache_read_tokens`
	hourUpsert = `INSERT INTO cache_hours (box, payer_kind, entry, slot, hour, calls, input_tokens, cache_write_tokens, cache_read_tokens)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (box, payer_kind, entry, slot) DO UPDATE SET
			calls = CASE WHEN cache_hours.hour = excluded.hour THEN cache_hours.calls + excluded.calls ELSE excluded.calls END,
			input_tokens = CASE WHEN cache_hours.hour = excluded.hour THEN cache_hours.input_tokens + excluded.input_tokens ELSE excluded.input_tokens END,
			cache_write_tokens = CASE WHEN cache_hours.hour = excluded.hour THEN cache_hours.cache_write_tokens + excluded.cache_write_tokens ELSE excluded.cache_write_tokens END,
			cache_read_tokens = CASE WHEN cache_hours.hour = excluded.hour THEN cache_hours.cache_read_tokens + excluded.cache_read_tokens ELSE excluded.cache_read_tokens END,
			hour = excluded.hour
		WHERE cache_hours.hour <= excluded.hour`
)

// The statements a reservation runs; see Statements.
const (
	limitsSelect = `SELECT (SELECT limit_micros FROM budgets WHERE box = $1 AND principal = ''),
		(SELECT limit_micros FROM budgets WHERE box = $1 AND principal = $2),
		(SELECT COUNT(*) FROM window_budgets WHERE box = $1 AND (principal = '' OR principal = $2))`
	tallyEnsure   = "INSERT INTO tallies (box, principal, month) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
	reserveAny    = "UPDATE tallies SET reserved = reserved + $1 WHERE box = $2 AND principal = $3 AND month = $4"
	reserveWithin = `UPDATE tallies SET reserved = reserved + $1
			WHERE box = $2 AND principal = $3 AND month = $4
			AND spent + reserved + $1 <= (SELECT limit_micros FROM budgets WHERE box = $2 AND principal = $3)`
	reservationInsert = "INSERT INTO reservations (box, principal, month, amount, at) VALUES ($1, $2, $3, $4, $5) RETURNING id"
)

// Statements are the texts of the statements Reserve, Settle and
// SettleMany run, which a store whose driver parses a statement anew on
// each run (SQLite) may prepare once and run prepared when Tx.Exec or
// Tx.QueryRow is given one of them.
func Statements() []string {
	return append([]string{boxThere, releaseDelete, releaseUpdate, tallyUpsert, usageUpsert, cacheUpsert, hourUpsert,
		limitsSelect, tallyEnsure, reserveAny, reserveWithin, reservationInsert}, windowStatements()...)
}

// principals are the tallies a call of principal is charged to: the box's
// own, then the principal's. Rows are always locked in this order.
func principals(principal string) []string {
	if principal == "" {
		return []string{""}
	}
	return []string{"", principal}
}

// limits returns the limit of the box's own monthly budget and of
// principal's on it, each nil when there is none, and how many window
// budgets apply (store.Windows).
func limits(ctx context.Context, tx Tx, box, principal string) (own, of *int64, windows int64, err error) {
	err = tx.QueryRow(ctx, limitsSelect, box, principal).Scan(&own, &of, &windows)
	if principal == "" {
		of = nil
	}
	return own, of, windows, err
}

// Budgeted reports whether any budget applies to a call of box paid by
// principal: a store asks it before it takes a writer, since most boxes
// have none.
func Budgeted(ctx context.Context, tx Tx, box, principal string) (bool, error) {
	own, of, windows, err := limits(ctx, tx, box, principal)
	return own != nil || of != nil || windows > 0, err
}

// Reserve holds r.Amount against the budgets that apply to r in tx, and
// returns the reservation's ID; 0 when no budget applies (nothing is
// held), and an *store.OverBudgetError naming the first budget it would
// pass (nothing is held then either, once tx is rolled back).
func Reserve(ctx context.Context, tx Tx, r store.Reservation) (int64, error) {
	own, of, windows, err := limits(ctx, tx, r.Box, r.Principal)
	if err != nil {
		return 0, err
	}
	if own == nil && of == nil && windows == 0 {
		return 0, nil // removed meanwhile
	}
	for _, p := range principals(r.Principal) {
		if _, err := tx.Exec(ctx, tallyEnsure, r.Box, p, r.Month); err != nil {
			return 0, err
		}
		limit := own
		if p != "" {
			limit = of
		}
		if limit == nil {
			if _, err := tx.Exec(ctx, reserveAny, r.Amount, r.Box, p, r.Month); err != nil {
				return 0, err
			}
			continue
		}
		n, err := tx.Exec(ctx, reserveWithin, r.Amount, r.Box, p, r.Month)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			e := &store.OverBudgetError{Budget: store.Budget{Box: r.Box, Principal: p, Limit: *limit}, Month: r.Month}
			if err := tx.QueryRow(ctx, "SELECT spent, reserved FROM tallies WHERE box = $1 AND principal = $2 AND month = $3",
				r.Box, p, r.Month).Scan(&e.Spent, &e.Reserved); err != nil {
				return 0, err
			}
			return 0, e
		}
	}
	var holds []hold
	if windows > 0 {
		if holds, err = reserveWindows(ctx, tx, r); err != nil {
			return 0, err
		}
	}
	var id int64
	if err := tx.QueryRow(ctx, reservationInsert, r.Box, r.Principal, r.Month, r.Amount, tx.Time(r.At)).Scan(&id); err != nil {
		return 0, err
	}
	return id, recordHolds(ctx, tx, id, holds)
}

// Release deletes reservation id and takes its amount off the tallies it
// was held against. A reservation already gone is not an error.
func Release(ctx context.Context, tx Tx, id int64) error {
	var box, principal, month string
	var amount int64
	err := tx.QueryRow(ctx, releaseDelete, id).Scan(&box, &principal, &month, &amount)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range principals(principal) {
		if _, err := tx.Exec(ctx, releaseUpdate,
			amount, box, p, month); err != nil {
			return err
		}
	}
	return releaseHolds(ctx, tx, id)
}

// Settle applies st in tx: it releases st's reservation, charges
// st.Charge to its tallies and adds its usage. A box that is gone is the
// driver's foreign-key error, which the store translates.
func Settle(ctx context.Context, tx Tx, st store.Settlement) error {
	return settle(ctx, tx, []store.Settlement{st})
}

// SettleMany applies batch in tx, leaving what Settle of each in turn
// would, except that the settlements of a box that is gone are skipped
// (the box was removed since the calls; nothing is left to charge). It
// asks once whether each box is there, releases each reservation in
// turn, and then runs one upsert per tally, usage row, month's and hour's
// prompt-cache row the batch touches, with the batch's sums: a few
// statements per box rather than five or so per call.
func SettleMany(ctx context.Context, tx Tx, batch []store.Settlement) error {
	there := make(map[string]bool)
	for _, st := range batch {
		there[st.Box] = false
	}
	for _, box := range slices.Sorted(maps.Keys(there)) {
		var one int
		err := tx.QueryRow(ctx, boxThere, box).Scan(&one)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		there[box] = err == nil
	}
	kept := make([]store.Settlement, 0, len(batch))
	for _, st := range batch {
		if there[st.Box] {
			kept = append(kept, st)
		}
	}
	return settle(ctx, tx, kept)
}

// Keys of the rows a batch of settlements adds to; see settle.
type (
	tallyKey struct{ box, principal, month string }
	usageKey struct{ box, month, payerKind, principal, model string }
	cacheKey struct{ box, month, payerKind, entry string }
	// slotKey is a slot of cache_hours' ring of hours.
	slotKey struct {
		box, payerKind, entry string
		slot                  int64
	}
)

// hourSums is what a batch leaves in a slot of cache_hours: the newest
// hour it adds to the slot and that hour's sums.
type hourSums struct {
	hour int64
	sum  store.CacheUsage
}

// settle is Settle of each of batch in turn, as a few statements per row
// touched. Reservations are released first and one by one, in the
// batch's order: each is its own row, and the tallies' reserved column
// that Release lowers is not the spent column that Settle raises. Then
// every sum is one upsert, the keys of each table in sorted order so that
// concurrent transactions on PostgreSQL lock rows in the same order (a
// tally's box's own row sorts before its principals', as principals
// orders them). The sums are exact since each column is a sum, but for
// cache_hours, whose upsert keeps the newer hour of a slot: applying an
// older hour h and then a newer h' leaves the same slot as applying h'
// alone (h' either replaces the slot, or adds to it when the slot already
// held h', or is dropped when the slot holds a newer hour still, and h
// does the same or less before it), so only each slot's newest hour, with
// its sums, is applied. The upserts go to the server in one exchange
// when tx is a Batcher.
func settle(ctx context.Context, tx Tx, batch []store.Settlement) error {
	tallies := make(map[tallyKey]int64)
	usage := make(map[usageKey]*store.Usage)
	cache := make(map[cacheKey]*store.CacheUsage)
	hours := make(map[slotKey]*hourSums)
	for _, st := range batch {
		if st.Reservation != 0 {
			if err := Release(ctx, tx, st.Reservation); err != nil {
				return err
			}
		}
		for _, p := range principals(st.Principal) {
			tallies[tallyKey{st.Box, p, st.Month}] += st.Charge
		}
		for _, u := range st.Usage {
			k := usageKey{u.Box, u.Month, u.PayerKind, u.Principal, u.Model}
			sum := usage[k]
			if sum == nil {
				usage[k] = &store.Usage{Box: u.Box, Month: u.Month, PayerKind: u.PayerKind, Principal: u.Principal, Model: u.Model}
				sum = usage[k]
			}
			sum.Add(u)
		}
		for _, c := range st.Cache {
			k := cacheKey{c.Box, c.Hour.UTC().Format("2006-01"), c.PayerKind, c.Entry}
			sum := cache[k]
			if sum == nil {
				sum = new(store.CacheUsage)
				cache[k] = sum
			}
			sum.Add(c)
			hour := CacheHour(c.Hour)
			sk := slotKey{c.Box, c.PayerKind, c.Entry, hour % store.CacheHours}
			h := hours[sk]
			switch {
			case h == nil || h.hour < hour:
				h = &hourSums{hour: hour}
				hours[sk] = h
			case h.hour > hour:
				continue // older than what the batch leaves in the slot
			}
			h.sum.Add(c)
		}
	}
	upserts := make([]Stmt, 0, len(tallies)+len(usage)+len(cache)+len(hours))
	for _, k := range slices.SortedFunc(maps.Keys(tallies), func(a, b tallyKey) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.principal, b.principal), strings.Compare(a.month, b.month))
	}) {
		upserts = append(upserts, Stmt{tallyUpsert, []any{k.box, k.principal, k.month, tallies[k]}})
	}
	for _, k := range slices.SortedFunc(maps.Keys(usage), func(a, b usageKey) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.month, b.month), strings.Compare(a.payerKind, b.payerKind),
			strings.Compare(a.principal, b.principal), strings.Compare(a.model, b.model))
	}) {
		u := usage[k]
		upserts = append(upserts, Stmt{usageUpsert, []any{u.Box, u.Month, u.PayerKind, u.Principal, u.Model, u.Calls, u.Unpriced, u.Unmeasured,
			u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens, u.Cost}})
	}
	for _, k := range slices.SortedFunc(maps.Keys(cache), func(a, b cacheKey) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.month, b.month), strings.Compare(a.payerKind, b.payerKind),
			strings.Compare(a.entry, b.entry))
	}) {
		c := cache[k]
		upserts = append(upserts, Stmt{cacheUpsert, []any{k.box, k.month, k.payerKind, k.entry, c.Calls, c.InputTokens, c.CacheWriteTokens, c.CacheReadTokens}})
	}
	// A slot holding an older hour is overwritten; one holding a newer
	// hour keeps it (the batch is then older than the ring, as a
	// settlement spooled for a day may be). See store.PromptCache.
	for _, k := range slices.SortedFunc(maps.Keys(hours), func(a, b slotKey) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.payerKind, b.payerKind), strings.Compare(a.entry, b.entry),
			cmp.Compare(a.slot, b.slot))
	}) {
		h := hours[k]
		upserts = append(upserts, Stmt{hourUpsert, []any{k.box, k.payerKind, k.entry, k.slot, h.hour, h.sum.Calls, h.sum.InputTokens, h.sum.CacheWriteTokens, h.sum.CacheReadTokens}})
	}
	windows, err := windowCharges(ctx, tx, batch, time.Now())
	if err != nil {
		return err
	}
	upserts = append(upserts, windows...)
	if b, ok := tx.(Batcher); ok {
		return b.ExecAll(ctx, upserts)
	}
	for _, st := range upserts {
		if _, err := tx.Exec(ctx, st.Query, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

// CacheHour is t's hour's number since the Unix epoch, as cache_hours
// keeps it.
func CacheHour(t time.Time) int64 {
	return t.Unix() / 3600
}

// CacheQuery is the query of the prompt-cache sums, for ListCache ($1 the
// box or "" for all, $2 the month) and ListCacheSince ($1 the box or "",
// $2 the first hour's number); both stores run it, ordering their text
// keys by bytes (collate is "" for SQLite, ` COLLATE "C"` for PostgreSQL).
func CacheQuery(since bool, collate string) string {
	from, where := "cache_usage", "month = $2"
	if since {
		from, where = "cache_hours", "hour >= $2"
	}
	return `SELECT box, payer_kind, entry, CAST(SUM(calls) AS BIGINT), CAST(SUM(input_tokens) AS BIGINT),
			CAST(SUM(cache_write_tokens) AS BIGINT), CAST(SUM(cache_read_tokens) AS BIGINT)
		FROM ` + from + ` WHERE ($1 = '' OR box = $1) AND ` + where + `
		GROUP BY box, payer_kind, entry ORDER BY box` + collate + `, payer_kind` + collate + `, entry` + collate
}
