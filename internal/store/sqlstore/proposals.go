package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// proposalColumns are a proposal's columns in the order scanProposal reads them.
const proposalColumns = "id, box, kind, secret, method, path, host, model, amount, reason, merge_key, seen, state, created_at, updated_at, expires_at, approved_until, decided_by, decided_at, payer"

// proposalKeep is how long a proposal no longer pending (and an approval
// past its end) is kept before OpenProposal forgets it.
const proposalKeep = 30 * 24 * time.Hour

// scanProposal reads one row of proposalColumns; a pending proposal past
// its expiry at at is returned as expired.
func scanProposal(row Scanner, at time.Time) (store.Proposal, error) {
	var p store.Proposal
	var created, updated, expires, until, decided int64
	err := row.Scan(&p.ID, &p.Box, &p.Kind, &p.Secret, &p.Method, &p.Path, &p.Host, &p.Model, &p.Amount, &p.Reason, &p.Key, &p.Count,
		&p.State, &created, &updated, &expires, &until, &p.DecidedBy, &decided, &p.Payer)
	if err != nil {
		return store.Proposal{}, err
	}
	p.CreatedAt, p.UpdatedAt, p.ExpiresAt = fromMicros(created), fromMicros(updated), fromMicros(expires)
	if until != 0 {
		p.Until = fromMicros(until)
	}
	if decided != 0 {
		p.DecidedAt = fromMicros(decided)
	}
	if p.State == store.ProposalPending && !p.ExpiresAt.After(at) {
		p.State = store.ProposalExpired
	}
	return p, nil
}

// OpenProposal records p as pending, or merges it into box's pending
// proposal with the same key; store.ErrFull past max pending,
// store.ErrNotFound if no box holds the token that hashes to tokenHash
// (store.ErrGraceEnded, store.ErrTokenExpired as for SaveDeclaration).
// It records no change.
func (s *Store) OpenProposal(ctx context.Context, p store.Proposal, tokenHash string, max int) (store.Proposal, error) {
	var out store.Proposal
	at := Micros(p.CreatedAt)
	err := s.Write(ctx, fmt.Sprintf("open proposal for box %q", p.Box), func(tx *sql.Tx) ([]store.Change, error) {
		// The box's row, locked: one proposal opens at a time per box,
		// and only while the box holds the token its request was
		// admitted with: a box added under the name of one removed
		// meanwhile is not asked about the removed box's request.
		if err := s.holdsToken(ctx, tx, p.Box, tokenHash); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE proposals SET state = 'expired' WHERE box = $1 AND state = 'pending' AND expires_at <= $2", p.Box, at); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM proposals WHERE box = $1 AND ((state IN ('expired', 'denied', 'used') AND updated_at < $2) OR (state = 'approved' AND approved_until <> 0 AND approved_until < $2))",
			p.Box, Micros(p.CreatedAt.Add(-proposalKeep))); err != nil {
			return nil, err
		}
		n, err := affected(ctx, tx, "UPDATE proposals SET seen = seen + 1, updated_at = $3 WHERE box = $1 AND merge_key = $2 AND state = 'pending'", p.Box, p.Key, at)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			var pending int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM proposals WHERE box = $1 AND state = 'pending'", p.Box).Scan(&pending); err != nil {
				return nil, err
			}
			if pending >= max {
				return nil, store.ErrFull
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO proposals ("+proposalColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, 'pending', $12, $12, $13, 0, '', 0, $14)",
				p.ID, p.Box, p.Kind, p.Secret, p.Method, p.Path, p.Host, p.Model, p.Amount, p.Reason, p.Key, at, Micros(p.ExpiresAt), p.Payer); err != nil {
				return nil, err
			}
		}
		out, err = scanProposal(tx.QueryRowContext(ctx, "SELECT "+proposalColumns+" FROM proposals WHERE box = $1 AND merge_key = $2 AND state = 'pending'", p.Box, p.Key), p.CreatedAt)
		return nil, err
	})
	if err != nil {
		if errors.Is(err, store.ErrFull) {
			return store.Proposal{}, fmt.Errorf("open proposal for box %q: %w", p.Box, store.ErrFull)
		}
		return store.Proposal{}, err
	}
	return out, nil
}

// Proposal returns the proposal with that ID, or store.ErrNotFound.
func (s *Store) Proposal(ctx context.Context, id string, at time.Time) (store.Proposal, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("proposal %q", id) }, "SELECT "+proposalColumns+" FROM proposals WHERE id = $1",
		func(r Scanner) (store.Proposal, error) { return scanProposal(r, at) }, id)
}

// ListProposals returns box's proposals ("" for all) in state ("" for
// any) at at, newest first, at most limit.
func (s *Store) ListProposals(ctx context.Context, box, state string, at time.Time, limit int) ([]store.Proposal, error) {
	op := fmt.Sprintf("list proposals of box %q", box)
	return s.proposals(ctx, op, at, "WHERE ($1 = '' OR box = $1) AND ($2 = '' OR CASE WHEN state = 'pending' AND expires_at <= $3 THEN 'expired' ELSE state END = $2) ORDER BY created_at DESC, id DESC LIMIT $4",
		box, state, Micros(at), limit)
}

// DecideProposal approves or denies a pending proposal;
// store.ErrNotFound if none, store.ErrNotPending if it is not pending
// (nor, for a denial, an approval in force).
func (s *Store) DecideProposal(ctx context.Context, id, state string, until time.Time, by string, at time.Time) (store.Proposal, error) {
	op := fmt.Sprintf("decide proposal %q", id)
	var out store.Proposal
	var u int64
	if !until.IsZero() {
		u = Micros(until)
	}
	err := s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		// A denial also withdraws an approval in force.
		n, err := affected(ctx, tx, "UPDATE proposals SET state = $2, approved_until = $3, decided_by = $4, decided_at = $5, updated_at = $5 WHERE id = $1 AND "+
			"((state = 'pending' AND expires_at > $5) OR ($2 = 'denied' AND state = 'approved' AND (approved_until = 0 OR approved_until > $5)))",
			id, state, u, by, Micros(at))
		if err != nil {
			return nil, err
		}
		out, err = scanProposal(tx.QueryRowContext(ctx, "SELECT "+proposalColumns+" FROM proposals WHERE id = $1", id), at)
		if err == nil && n == 0 {
			err = store.ErrNotPending
		}
		return nil, err
	})
	if errors.Is(err, store.ErrNotPending) {
		return store.Proposal{}, fmt.Errorf("%s: %w", op, store.ErrNotPending)
	}
	return out, err
}

// ApprovalsInForce returns box's approvals of kind in force at at, while
// the box holds the token that hashes to tokenHash (tokenHeld), in one
// statement; none otherwise.
func (s *Store) ApprovalsInForce(ctx context.Context, box, tokenHash, kind string, at time.Time) ([]store.Proposal, error) {
	op := fmt.Sprintf("approvals of box %q", box)
	return s.proposals(ctx, op, at, "WHERE box = $1 AND kind = $2 AND state = 'approved' AND (approved_until = 0 OR approved_until > $3) AND "+s.tokenHeld("$1", "$4")+" ORDER BY created_at, id",
		box, kind, Micros(at), tokenHash)
}

// proposals reads the proposals the query's WHERE (and ORDER) picks, as
// at sees them.
func (s *Store) proposals(ctx context.Context, op string, at time.Time, where string, args ...any) ([]store.Proposal, error) {
	return collect(ctx, s, op, "SELECT "+proposalColumns+" FROM proposals "+where, func(r Scanner) (store.Proposal, error) {
		return scanProposal(r, at)
	}, args...)
}

// UseApproval marks an approval in force used; store.ErrNotPending if
// it is not one.
func (s *Store) UseApproval(ctx context.Context, id string, at time.Time) error {
	op := fmt.Sprintf("use approval %q", id)
	return s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		n, err := affected(ctx, tx, "UPDATE proposals SET state = 'used', updated_at = $2 WHERE id = $1 AND state = 'approved' AND (approved_until = 0 OR approved_until > $2)", id, Micros(at))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, store.ErrNotPending // Write prefixes op
		}
		return nil, nil
	})
}

// SetAsk turns box's ask mode for scope on or off; store.ErrNotFound if no box.
func (s *Store) SetAsk(ctx context.Context, box, scope string, on bool) error {
	query := "INSERT INTO proposal_asks (box, scope) VALUES ($1, $2) ON CONFLICT (box, scope) DO NOTHING"
	if !on {
		query = "DELETE FROM proposal_asks WHERE box = $1 AND scope = $2"
	}
	return s.put(ctx, fmt.Sprintf("set ask %q of box %q", scope, box), nil, query, box, scope)
}

// ListAsks returns the scopes box has in ask mode, sorted.
func (s *Store) ListAsks(ctx context.Context, box string) ([]string, error) {
	return collect(ctx, s, fmt.Sprintf("list asks of box %q", box), "SELECT scope FROM proposal_asks WHERE box = $1 ORDER BY scope"+s.D.Collate(), value[string], box)
}

// ListAsksOfToken returns the scopes box has in ask mode, sorted, while
// the box holds the token that hashes to tokenHash (tokenHeld), in one
// statement; none otherwise.
func (s *Store) ListAsksOfToken(ctx context.Context, box, tokenHash string) ([]string, error) {
	return collect(ctx, s, fmt.Sprintf("list asks of box %q", box), "SELECT scope FROM proposal_asks WHERE box = $1 AND "+s.tokenHeld("$1", "$2")+" ORDER BY scope"+s.D.Collate(), value[string], box, tokenHash)
}
