package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// SetWindowBudget creates or replaces the budget of b.Box, b.Principal
// and b.Window; store.ErrNotFound if there is no such box.
func (s *Store) SetWindowBudget(ctx context.Context, b store.Budget) error {
	op := fmt.Sprintf("set %s budget of box %q", b.Window, b.Box)
	if _, err := store.ParseWindow(b.Window); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if b.Limit < 0 {
		return fmt.Errorf("%s: negative limit", op)
	}
	return s.put(ctx, op, []store.Change{{Kind: store.ChangeBudget, Key: b.Box}},
		`INSERT INTO window_budgets (box, principal, win, limit_micros, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (box, principal, win) DO UPDATE SET limit_micros = excluded.limit_micros, updated_at = excluded.updated_at`,
		b.Box, b.Principal, b.Window, b.Limit, s.D.Time(b.UpdatedAt))
}

// ListWindowBudgets returns the window budgets of box, the box's own
// first, then by principal and window.
func (s *Store) ListWindowBudgets(ctx context.Context, box string) ([]store.Budget, error) {
	return collect(ctx, s, fmt.Sprintf("list window budgets of box %q", box), "SELECT principal, win, limit_micros, updated_at FROM window_budgets WHERE box = $1 ORDER BY principal"+s.D.Collate()+", win"+s.D.Collate(),
		func(r Scanner) (store.Budget, error) {
			b := store.Budget{Box: box}
			err := r.Scan(&b.Principal, &b.Window, &b.Limit, Time(&b.UpdatedAt))
			return b, err
		}, box)
}

// DeleteWindowBudget removes a window budget; store.ErrNotFound if none.
func (s *Store) DeleteWindowBudget(ctx context.Context, box, principal, window string) error {
	return s.touch(ctx, fmt.Sprintf("delete %s budget of box %q", window, box), []store.Change{{Kind: store.ChangeBudget, Key: box}},
		"DELETE FROM window_budgets WHERE box = $1 AND principal = $2 AND win = $3", box, principal, window)
}

// WindowTallies returns what each of box's window budgets counts at at.
func (s *Store) WindowTallies(ctx context.Context, box string, at time.Time) ([]store.WindowTally, error) {
	out, err := windowTallies(ctx, dbTx{q: s.R, s: s}, box, at)
	if err != nil {
		return nil, s.D.Translate(fmt.Sprintf("window tallies of box %q", box), err)
	}
	return out, nil
}

// Window budgets (store.Windows) are held to by the same reservation as
// the monthly ones, in the same transaction. A window's limit is over a
// sum of tallies (one a bucket: a day, or a week), not one row, so a
// single conditional UPDATE cannot lock everything it reads: each
// reservation first locks the window budget's own row (an UPDATE that
// changes nothing), then raises the current bucket's reserved by one
// conditional UPDATE on the window's sum. In PostgreSQL a concurrent
// reservation against the same window waits for that row lock, and its
// conditional UPDATE, a new statement under READ COMMITTED, then sees
// what the first committed; SQLite's writer is one at a time. Rows are
// locked in the order monthly tallies, window budgets (by principal, then
// window), window tallies, as settlements lock monthly tallies before
// window tallies.
const (
	windowsSelect = `SELECT principal, win, limit_micros FROM window_budgets
		WHERE box = $1 AND (principal = '' OR principal = $2) ORDER BY principal, win`
	windowsAll   = "SELECT principal, win, limit_micros FROM window_budgets WHERE box = $1 ORDER BY principal, win"
	windowLock   = "UPDATE window_budgets SET limit_micros = limit_micros WHERE box = $1 AND principal = $2 AND win = $3"
	windowEnsure = "INSERT INTO window_tallies (box, principal, win, bucket) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
	windowWithin = `UPDATE window_tallies SET reserved = reserved + $1
		WHERE box = $2 AND principal = $3 AND win = $4 AND bucket = $5
		AND $1 + (SELECT CAST(COALESCE(SUM(t.spent + t.reserved), 0) AS BIGINT) FROM window_tallies t
			WHERE t.box = $2 AND t.principal = $3 AND t.win = $4 AND t.bucket >= $6)
			<= (SELECT limit_micros FROM window_budgets WHERE box = $2 AND principal = $3 AND win = $4)`
	windowSum = `SELECT CAST(COALESCE(SUM(spent), 0) AS BIGINT), CAST(COALESCE(SUM(reserved), 0) AS BIGINT) FROM window_tallies
		WHERE box = $1 AND principal = $2 AND win = $3 AND bucket >= $4 AND bucket <= $5`
	holdInsert  = "INSERT INTO window_holds (reservation, box, principal, win, bucket, amount) VALUES ($1, $2, $3, $4, $5, $6)"
	holdsDelete = "DELETE FROM window_holds WHERE reservation = $1 RETURNING box, principal, win, bucket, amount"
	holdRelease = `UPDATE window_tallies SET reserved = CASE WHEN reserved > $1 THEN reserved - $1 ELSE 0 END
		WHERE box = $2 AND principal = $3 AND win = $4 AND bucket = $5`
	windowCharge = `INSERT INTO window_tallies (box, principal, win, bucket, spent) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (box, principal, win, bucket) DO UPDATE SET spent = window_tallies.spent + excluded.spent`
)

// windowStatements are the window budgets' statements, for SpendStatements.
func windowStatements() []string {
	return []string{windowsSelect, windowLock, windowEnsure, windowWithin, windowSum, holdInsert, holdsDelete, holdRelease, windowCharge}
}

// hold is what one reservation holds against one window budget.
type hold struct {
	box, principal, win, bucket string
	amount                      int64
}

// windowsOf returns the window budgets of box that query, run with args,
// reads (windowsSelect: those that apply to a call paid by a principal,
// in the order their rows are locked; windowsAll: every one), and their
// windows; a window name the binary does not read is skipped.
func windowsOf(ctx context.Context, tx SpendTx, box, query string, args ...any) ([]store.Budget, []store.Window, error) {
	var bs []store.Budget
	var ws []store.Window
	err := tx.Each(ctx, query, args, func(r Scanner) error {
		b := store.Budget{Box: box}
		if err := r.Scan(&b.Principal, &b.Window, &b.Limit); err != nil {
			return err
		}
		w, err := store.ParseWindow(b.Window)
		if err != nil {
			return nil
		}
		bs, ws = append(bs, b), append(ws, w)
		return nil
	})
	return bs, ws, err
}

// reserveWindows holds r.Amount against every window budget that applies
// to r, at r.WindowAt (else r.At), and returns the holds to record once the reservation has
// its ID; an *store.OverBudgetError naming the first it would pass.
func reserveWindows(ctx context.Context, tx SpendTx, r store.Reservation) ([]hold, error) {
	bs, ws, err := windowsOf(ctx, tx, r.Box, windowsSelect, r.Box, r.Principal)
	if err != nil || len(bs) == 0 {
		return nil, err
	}
	when := cmp.Or(r.WindowAt, r.At)
	holds := make([]hold, 0, len(bs))
	for i, b := range bs {
		w := ws[i]
		bucket, from := w.Bucket(when), w.From(when)
		if _, err := tx.Exec(ctx, windowLock, r.Box, b.Principal, b.Window); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, windowEnsure, r.Box, b.Principal, b.Window, bucket); err != nil {
			return nil, err
		}
		n, err := tx.Exec(ctx, windowWithin, r.Amount, r.Box, b.Principal, b.Window, bucket, from)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			e := &store.OverBudgetError{Budget: b, Month: bucket}
			if err := tx.QueryRow(ctx, windowSum, r.Box, b.Principal, b.Window, from, bucket).Scan(&e.Spent, &e.Reserved); err != nil {
				return nil, err
			}
			return nil, e
		}
		holds = append(holds, hold{r.Box, b.Principal, b.Window, bucket, r.Amount})
	}
	return holds, nil
}

// recordHolds records what reservation id holds against window budgets.
func recordHolds(ctx context.Context, tx SpendTx, id int64, holds []hold) error {
	for _, h := range holds {
		if _, err := tx.Exec(ctx, holdInsert, id, h.box, h.principal, h.win, h.bucket, h.amount); err != nil {
			return err
		}
	}
	return nil
}

// releaseHolds deletes what reservation id holds against window budgets
// and takes it off their tallies.
func releaseHolds(ctx context.Context, tx SpendTx, id int64) error {
	var holds []hold
	err := tx.Each(ctx, holdsDelete, []any{id}, func(r Scanner) error {
		var h hold
		if err := r.Scan(&h.box, &h.principal, &h.win, &h.bucket, &h.amount); err != nil {
			return err
		}
		holds = append(holds, h)
		return nil
	})
	if err != nil {
		return err
	}
	for _, h := range holds {
		if _, err := tx.Exec(ctx, holdRelease, h.amount, h.box, h.principal, h.win, h.bucket); err != nil {
			return err
		}
	}
	return nil
}

// windowKey is a window tally a batch charges.
type windowKey struct{ box, principal, win, bucket string }

// windowCharges returns the upserts that charge batch to the window
// budgets that apply to each of its settlements, in the buckets of its At
// (now when zero), in the order of their keys.
func windowCharges(ctx context.Context, tx SpendTx, batch []store.Settlement, now time.Time) ([]Stmt, error) {
	type payer struct{ box, principal string }
	charged := make(map[payer][]store.Settlement)
	for _, st := range batch {
		if st.Charge > 0 {
			k := payer{st.Box, st.Principal}
			charged[k] = append(charged[k], st)
		}
	}
	sums := make(map[windowKey]int64)
	for _, k := range slices.SortedFunc(maps.Keys(charged), func(a, b payer) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.principal, b.principal))
	}) {
		bs, ws, err := windowsOf(ctx, tx, k.box, windowsSelect, k.box, k.principal)
		if err != nil {
			return nil, err
		}
		for i, b := range bs {
			for _, st := range charged[k] {
				at := st.At
				if at.IsZero() {
					at = now
				}
				sums[windowKey{k.box, b.Principal, b.Window, ws[i].Bucket(at)}] += st.Charge
			}
		}
	}
	out := make([]Stmt, 0, len(sums))
	for _, k := range slices.SortedFunc(maps.Keys(sums), func(a, b windowKey) int {
		return cmp.Or(strings.Compare(a.box, b.box), strings.Compare(a.principal, b.principal), strings.Compare(a.win, b.win),
			strings.Compare(a.bucket, b.bucket))
	}) {
		out = append(out, Stmt{windowCharge, []any{k.box, k.principal, k.win, k.bucket, sums[k]}})
	}
	return out, nil
}

// windowTallies returns what each of box's window budgets counts at at,
// the box's own first, then by principal and window.
func windowTallies(ctx context.Context, tx SpendTx, box string, at time.Time) ([]store.WindowTally, error) {
	bs, ws, err := windowsOf(ctx, tx, box, windowsAll, box)
	if err != nil {
		return nil, err
	}
	out := make([]store.WindowTally, 0, len(bs))
	for i, b := range bs {
		t := store.WindowTally{Budget: b, From: ws[i].From(at), Bucket: ws[i].Bucket(at)}
		if err := tx.QueryRow(ctx, windowSum, box, b.Principal, b.Window, t.From, t.Bucket).Scan(&t.Spent, &t.Reserved); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
