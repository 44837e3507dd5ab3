package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/spendsql"
)

// Reserve holds r.Amount against the budgets that apply to r, in one
// transaction; see store.Spend and spendsql.Reserve.
func (s *Store) Reserve(ctx context.Context, r store.Reservation) (int64, error) {
	op := fmt.Sprintf("reserve for box %q", r.Box)
	// Most boxes have no budget: find that out without taking the writer.
	ok, err := s.Budgeted(ctx, op, r.Box, r.Principal)
	if err != nil || !ok {
		return 0, err
	}
	// Concurrent reservations are made in one transaction (grouped); one
	// made for a caller that has gone by the time it is committed is
	// released again.
	var id int64
	err = s.grouped(ctx, op, func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		var err error
		id, err = spendsql.Reserve(ctx, s.SpendTx(tx), r)
		return nil, err
	}, func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, spendsql.Release(ctx, s.SpendTx(tx), id)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}

// Settle releases s's reservation, charges s.Charge to its tallies and
// adds its usage, in one transaction (shared with concurrent reservations
// and settlements: see grouped); store.ErrNotFound if the box is gone.
func (s *Store) Settle(ctx context.Context, st store.Settlement) error {
	return s.grouped(ctx, fmt.Sprintf("settle for box %q", st.Box), func(ctx context.Context, tx *sql.Tx) ([]store.Change, error) {
		return nil, spendsql.Settle(ctx, s.SpendTx(tx), st)
	}, nil)
}
