package sqlstore

// The budget algorithm: the reservation of a call's cost against its
// budgets, the release of a reservation, and a call's settlement (see
// store.Spend). Each backend runs it in its own transaction, through
// SpendTx (see Dialect.Spend). Its SQL writes CASE where one would write
// max(a, b) in SQLite and GREATEST(a, b) in PostgreSQL, and ON CONFLICT
// … DO UPDATE naming the table of the row it updates (PostgreSQL finds a
// bare column name ambiguous beside excluded).
//
// The reservation is one conditional UPDATE per budget (spent + reserved
// + amount must not pass the limit), never a read and then a write; in
// PostgreSQL a concurrent Reserve on the same tally waits for this one's
// row lock and then evaluates its condition against the committed row.
// Tallies are always touched in the order principals gives: the box's
// own, then the principal's; a batch of settlements (settleMany) charges
// its tallies, and adds to its usage and prompt-cache rows, in the order
// of their keys, so that replicas writing batches at once lock them in
// the same order.

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// The statements a settlement runs; see SpendStatements.
const (
	boxThere      = "SELECT 1 FROM boxes WHERE name = $1"
	boxIs         = "SELECT 1 FROM boxes WHERE name = $1 AND created_at = $2" // the box enrolled at $2 (Settlement.BoxCreated)
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

// The statements a reservation runs; see SpendStatements.
const (
	limitsSelect = `SELECT (SELECT limit_micros FROM budgets WHERE box = $1 AND principal = ''),
		(SELECT limit_micros FROM budgets WHERE box = $1 AND principal = $2),
		(SELECT COUNT(*) FROM window_budgets WHERE box = $1 AND (principal = '' OR principal = $2))`
	// limitsOf is limitsSelect of the box named $1 enrolled at $3 alone
	// (store.Reservation's BoxCreated): no row when the box of that name
	// is another, or there is none.
	limitsOf = limitsSelect + `
		FROM boxes WHERE name = $1 AND created_at = $3`
	tallyEnsure   = "INSERT INTO tallies (box, principal, month) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
	reserveAny    = "UPDATE tallies SET reserved = reserved + $1 WHERE box = $2 AND principal = $3 AND month = $4"
	reserveWithin = `UPDATE tallies SET reserved = reserved + $1
			WHERE box = $2 AND principal = $3 AND month = $4
			AND spent + reserved + $1 <= (SELECT limit_micros FROM budgets WHERE box = $2 AND principal = $3)`
)

// reservationInsert is the statement that makes a reservation, stamped
// with its time ($5) or, when that is NULL, with the database's clock
// (now, the dialect's Now(0)).
func reservationInsert(now string) string {
	return "INSERT INTO reservations (box, principal, month, amount, at) VALUES ($1, $2, $3, $4, COALESCE($5, " + now + ")) RETURNING id"
}

// SpendStatements are the texts of the statements the budget algorithm
// runs, which a backend whose driver parses a statement anew on each run
// (SQLite) prepares once (Prepare), for SpendTx to run them prepared; now
// is the dialect's Now(0).
func SpendStatements(now string) []string {
	return append([]string{boxThere, boxIs, releaseDelete, releaseUpdate, tallyUpsert, usageUpsert, cacheUpsert, hourUpsert,
		limitsSelect, limitsOf, tallyEnsure, reserveAny, reserveWithin, reservationInsert(now)}, windowStatements()...)
}

// principals are the tallies a call of principal is charged to: the box's
// own, then the principal's. Rows are always locked in this order.
func principals(principal string) []string {
	if principal == "" {
		return []string{""}
	}
	return []string{"", principal}
}

// limits returns the limit of r's box's own monthly budget and of
// r.Principal's on it, each nil when there is none, and how many window
// budgets apply (store.Windows). With r.BoxCreated set they are the
// box's enrolled then, and none when the box of that name is another
// (or there is none); the box's row is then kept (ForKeyShare) until tx
// commits, so that the box whose tallies the reservation raises next is
// the one read here: neither removed nor replaced meanwhile.
func limits(ctx context.Context, tx SpendTx, r store.Reservation) (own, of *int64, windows int64, err error) {
	if r.BoxCreated.IsZero() {
		err = tx.QueryRow(ctx, limitsSelect, r.Box, r.Principal).Scan(&own, &of, &windows)
	} else {
		q := limitsOf
		if lock := tx.ForKeyShare(); lock != "" {
			q += lock
		}
		err = tx.QueryRow(ctx, q, r.Box, r.Principal, tx.Time(r.BoxCreated)).Scan(&own, &of, &windows)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, 0, nil
		}
	}
	if r.Principal == "" {
		of = nil
	}
	return own, of, windows, err
}

// budgeted reports whether any budget applies to a call of box paid by
// principal.
func budgeted(ctx context.Context, tx SpendTx, box, principal string) (bool, error) {
	own, of, windows, err := limits(ctx, tx, store.Reservation{Box: box, Principal: principal})
	return own != nil || of != nil || windows > 0, err
}

// ReserveIn holds r.Amount against the budgets that apply to r in tx, and
// returns the reservation's ID; 0 when no budget applies (nothing is
// held: none applies to a box other than r.BoxCreated names), and an
// *store.OverBudgetError naming the first budget it would pass (nothing
// is held then either, once tx is rolled back). The reservation is
// stamped r.At, or the database's clock when r.At is zero.
func ReserveIn(ctx context.Context, tx SpendTx, r store.Reservation) (int64, error) {
	own, of, windows, err := limits(ctx, tx, r)
	if err != nil {
		return 0, err
	}
	if own == nil && of == nil && windows == 0 {
		return 0, nil // removed meanwhile, or another box of its name
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
	var at any
	if !r.At.IsZero() {
		at = tx.Time(r.At)
	}
	if err := tx.QueryRow(ctx, reservationInsert(tx.Now(0)), r.Box, r.Principal, r.Month, r.Amount, at).Scan(&id); err != nil {
		return 0, err
	}
	return id, recordHolds(ctx, tx, id, holds)
}

// ReleaseIn deletes reservation id and takes its amount off the tallies it
// was held against. A reservation already gone is not an error.
func ReleaseIn(ctx context.Context, tx SpendTx, id int64) error {
	_, err := releaseBy(ctx, tx, releaseDelete, id)
	return err
}

// releaseBy is ReleaseIn with reservation id deleted by del, a DELETE
// of the row whose id is $1 … RETURNING box, principal, month, amount;
// it reports whether del deleted it.
func releaseBy(ctx context.Context, tx SpendTx, del string, id int64) (bool, error) {
	var box, principal, month string
	var amount int64
	err := tx.QueryRow(ctx, del, id).Scan(&box, &principal, &month, &amount)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, p := range principals(principal) {
		if _, err := tx.Exec(ctx, releaseUpdate,
			amount, box, p, month); err != nil {
			return false, err
		}
	}
	return true, releaseHolds(ctx, tx, id)
}

// settleMany applies batch in tx, leaving what settle of each in turn
// would, except that the settlements of a box that is gone are skipped
// (the box was removed since the calls; nothing is left to charge), as
// are those of a box other than their BoxCreated names (one added under
// the name of the box removed, which made none of the calls). It asks
// once whether each box is there, releases each reservation in turn,
// and then runs one upsert per tally, usage row, month's and hour's
// prompt-cache row the batch touches, with the batch's sums: a few
// statements per box rather than five or so per call.
func settleMany(ctx context.Context, tx SpendTx, batch []store.Settlement, now time.Time, dbHour int64) error {
	there := make(map[enrolment]bool)
	for _, st := range batch {
		there[enrolmentOf(st)] = false
	}
	for _, e := range slices.SortedFunc(maps.Keys(there), func(a, b enrolment) int {
		return cmp.Or(strings.Compare(a.box, b.box), a.created.Compare(b.created))
	}) {
		ok, err := present(ctx, tx, e)
		if err != nil {
			return err
		}
		there[e] = ok
	}
	kept := make([]store.Settlement, 0, len(batch))
	for _, st := range batch {
		if there[enrolmentOf(st)] {
			kept = append(kept, st)
		}
	}
	return settle(ctx, tx, kept, now, dbHour)
}

// enrolment is a box as a settlement names it: by its name, and when
// it was enrolled (store.Settlement's BoxCreated; zero: whichever box
// has the name), in UTC with no monotonic reading, so that equal times
// are equal keys.
type enrolment struct {
	box     string
	created time.Time
}

// enrolmentOf is the box st names.
func enrolmentOf(st store.Settlement) enrolment {
	return enrolment{st.Box, st.BoxCreated.UTC().Round(0)}
}

// present reports whether the box e names is there, in tx: the box of
// its name, enrolled at e.created when that is not zero, whose row is
// then kept (ForKeyShare) until tx commits, so that the box charged is
// the one found here: neither removed nor replaced meanwhile.
func present(ctx context.Context, tx SpendTx, e enrolment) (bool, error) {
	var one int
	var err error
	if e.created.IsZero() {
		err = tx.QueryRow(ctx, boxThere, e.box).Scan(&one)
	} else {
		q := boxIs
		if lock := tx.ForKeyShare(); lock != "" {
			q += lock
		}
		err = tx.QueryRow(ctx, q, e.box, tx.Time(e.created)).Scan(&one)
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
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

// databaseHour is the database's hour's number since the Unix epoch,
// read by nowMilli (the dialect's NowMilli), when batch has prompt-cache
// rows; otherwise noHour, which bounds none.
func databaseHour(ctx context.Context, tx SpendTx, batch []store.Settlement, nowMilli string) (int64, error) {
	if !slices.ContainsFunc(batch, func(st store.Settlement) bool { return len(st.Cache) > 0 }) {
		return noHour, nil
	}
	var ms int64
	if err := tx.QueryRow(ctx, "SELECT "+nowMilli).Scan(&ms); err != nil {
		return 0, err
	}
	return hourOfMilli(ms), nil
}

// noHour is the largest hour, which bounds no prompt-cache row's.
const noHour = math.MaxInt64

// hourOfMilli is the hour's number since the Unix epoch of ms, the
// milliseconds since then that the dialect's NowMilli reads.
func hourOfMilli(ms int64) int64 { return ms / (3600 * 1000) }

// hourSums is what a batch leaves in a slot of cache_hours: the newest
// hour it adds to the slot and that hour's sums.
type hourSums struct {
	hour int64
	sum  store.CacheUsage
}

// settle applies each of batch in turn in tx (releases its reservation,
// charges its Charge to its tallies and adds its usage), as a few statements per row
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
// its sums, is applied. The upserts go through tx.ExecAll. A settlement
// without a time is charged to the window buckets of now, the replica's
// clock.
//
// A prompt-cache row's hour is at most dbHour, the database's hour (read
// in the transaction when the batch has any such row: databaseHour, or
// with a statement the transaction makes anyway; noHour otherwise): the
// hour is the settling replica's, and one whose clock runs hours ahead
// would otherwise take the slot of an hour the others are still in, or of
// one they have yet to pass, and drop what they add to it.
func settle(ctx context.Context, tx SpendTx, batch []store.Settlement, now time.Time, dbHour int64) error {
	tallies := make(map[tallyKey]int64)
	usage := make(map[usageKey]*store.Usage)
	cache := make(map[cacheKey]*store.CacheUsage)
	hours := make(map[slotKey]*hourSums)
	for _, st := range batch {
		if st.Reservation != 0 {
			if err := ReleaseIn(ctx, tx, st.Reservation); err != nil {
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
			// The month is the clamped hour's: a replica's clock ahead
			// of the database's puts nothing in a month not yet begun.
			hour := min(cacheHour(c.Hour), dbHour)
			k := cacheKey{c.Box, time.Unix(hour*3600, 0).UTC().Format("2006-01"), c.PayerKind, c.Entry}
			sum := cache[k]
			if sum == nil {
				sum = new(store.CacheUsage)
				cache[k] = sum
			}
			sum.Add(c)
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
	windows, err := windowCharges(ctx, tx, batch, now)
	if err != nil {
		return err
	}
	upserts = append(upserts, windows...)
	return tx.ExecAll(ctx, upserts)
}
