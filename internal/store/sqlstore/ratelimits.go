package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// SetRateLimit creates or replaces the rate limit of l.Box and
// l.Principal; store.ErrNotFound if there is no such box.
func (s *Store) SetRateLimit(ctx context.Context, l store.RateLimit) error {
	op := fmt.Sprintf("set rate limit of box %q", l.Box)
	if l.InputTPM < 0 || l.OutputTPM < 0 || l.RPM < 0 {
		return fmt.Errorf("%s: negative limit", op)
	}
	return s.put(ctx, op, nil,
		`INSERT INTO rate_limits (box, principal, input_tpm, output_tpm, rpm, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (box, principal) DO UPDATE SET input_tpm = excluded.input_tpm, output_tpm = excluded.output_tpm,
				rpm = excluded.rpm, updated_at = excluded.updated_at`,
		l.Box, l.Principal, l.InputTPM, l.OutputTPM, l.RPM, s.D.Time(l.UpdatedAt))
}

// ListRateLimits returns the rate limits of box, or of every box for "".
func (s *Store) ListRateLimits(ctx context.Context, box string) ([]store.RateLimit, error) {
	return collect(ctx, s, fmt.Sprintf("list rate limits of box %q", box), `SELECT box, principal, input_tpm, output_tpm, rpm, updated_at FROM rate_limits
		WHERE ($1 = '' OR box = $2) ORDER BY box`+s.D.Collate()+`, principal`+s.D.Collate(), func(r Scanner) (store.RateLimit, error) {
		var l store.RateLimit
		err := r.Scan(&l.Box, &l.Principal, &l.InputTPM, &l.OutputTPM, &l.RPM, Time(&l.UpdatedAt))
		return l, err
	}, box, box)
}

// DeleteRateLimit removes a rate limit; store.ErrNotFound if none.
func (s *Store) DeleteRateLimit(ctx context.Context, box, principal string) error {
	return s.touch(ctx, fmt.Sprintf("delete rate limit of box %q", box), nil,
		"DELETE FROM rate_limits WHERE box = $1 AND principal = $2", box, principal)
}

// ExchangeRates writes mine, stamped by the database's clock, and
// returns the other replicas' counts written within the last within by
// it.
func (s *Store) ExchangeRates(ctx context.Context, replica string, mine []store.RateCount, within time.Duration) ([]store.RateCount, error) {
	op := "exchange rate counts"
	now := s.D.NowMilli()
	if len(mine) > 0 {
		err := s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
			for _, c := range mine {
				if _, err := tx.ExecContext(ctx, `INSERT INTO rate_counts (key, replica, requests, input_tokens, output_tokens, at) VALUES ($1, $2, $3, $4, $5, `+now+`)
					ON CONFLICT (key, replica) DO UPDATE SET requests = excluded.requests, input_tokens = excluded.input_tokens,
						output_tokens = excluded.output_tokens, at = excluded.at`,
					c.Key, replica, c.Requests, c.InputTokens, c.OutputTokens); err != nil {
					return nil, err
				}
			}
			_, err := tx.ExecContext(ctx, "DELETE FROM rate_counts WHERE at < "+now+" - $1", (within + time.Hour).Milliseconds())
			return nil, err
		})
		if err != nil {
			return nil, err
		}
	}
	return collect(ctx, s, op, `SELECT key, replica, requests, input_tokens, output_tokens, at FROM rate_counts
		WHERE replica <> $1 AND at >= `+now+` - $2`, func(r Scanner) (store.RateCount, error) {
		var c store.RateCount
		var at int64
		err := r.Scan(&c.Key, &c.Replica, &c.Requests, &c.InputTokens, &c.OutputTokens, &at)
		c.At = time.UnixMilli(at).UTC()
		return c, err
	}, replica, within.Milliseconds())
}
