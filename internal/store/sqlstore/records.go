package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// AddFeedback stores f and, in the same write, drops f.Box's oldest
// batches while the box keeps more than bound allows, never f itself;
// store.ErrNotFound if there is no box named f.Box holding the token that
// hashes to tokenHash (store.ErrGraceEnded, store.ErrTokenExpired as for
// SaveDeclaration). f.ID is ignored.
// Feedback is never cached, so no change is recorded.
func (s *Store) AddFeedback(ctx context.Context, f store.FeedbackBatch, tokenHash string, bound store.FeedbackBound) (store.FeedbackAdded, error) {
	var added store.FeedbackAdded
	batches, bytes := int64(bound.Batches), bound.Bytes
	if batches <= 0 {
		batches = math.MaxInt64
	}
	if bytes <= 0 {
		bytes = math.MaxInt64
	}
	err := s.Write(ctx, fmt.Sprintf("add feedback of box %q", f.Box), func(tx *sql.Tx) ([]store.Change, error) {
		added = store.FeedbackAdded{}
		// The batch is the box's that holds the token it was admitted
		// with: a box added under the name of one removed meanwhile
		// (whose owner may not have consented) keeps none of its
		// feedback.
		if err := s.holdsToken(ctx, tx, f.Box, tokenHash); err != nil {
			return nil, err
		}
		// The box's totals next: on PostgreSQL the upsert holds their row
		// until the write commits, so that concurrent appends to one box
		// take their IDs and check the bound in turn.
		var n, total int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO feedback_totals (box, batches, bytes) VALUES ($1, 1, $2)
			ON CONFLICT (box) DO UPDATE SET batches = feedback_totals.batches + 1, bytes = feedback_totals.bytes + excluded.bytes
			RETURNING batches, bytes`, f.Box, len(f.Body)).Scan(&n, &total); err != nil {
			return nil, err
		}
		if err := tx.QueryRowContext(ctx, "INSERT INTO feedback (box, at, words, body) VALUES ($1, $2, $3, $4) RETURNING id",
			f.Box, s.D.Time(f.At), s.D.Words(f.Words), Blob(f.Body)).Scan(&added.ID); err != nil {
			return nil, err
		}
		if n <= batches && total <= bytes {
			return nil, nil
		}
		dropped, err := dropPastBound(ctx, tx, f.Box, added.ID, n, total, batches, bytes)
		added.Dropped, added.DroppedBytes = dropped.Batches, dropped.Bytes
		return nil, err
	})
	if err != nil {
		return store.FeedbackAdded{}, err
	}
	return added, nil
}

// dropPastBound drops box's oldest batches, never the one whose ID is
// newest, while the n batches of total bytes it keeps are more than
// batches or bytes, takes them off the box's totals, and returns what it
// dropped. It reads the oldest a page at a time, so that an append at
// the bound, which drops one or a few, costs the same however many the
// box keeps.
func dropPastBound(ctx context.Context, tx *sql.Tx, box string, newest, n, total, batches, bytes int64) (store.FeedbackKept, error) {
	type sized struct{ id, bytes int64 }
	var dropped store.FeedbackKept
	var first, cut int64
	for n > batches || total > bytes {
		page, err := all(ctx, tx, "SELECT id, LENGTH(body) FROM feedback WHERE box = $1 AND id > $2 AND id < $3 ORDER BY id LIMIT $4",
			func(r Scanner) (sized, error) {
				var b sized
				err := r.Scan(&b.id, &b.bytes)
				return b, err
			}, box, cut, newest, max(n-batches, 16))
		if err != nil {
			return store.FeedbackKept{}, err
		}
		if len(page) == 0 { // only the newest is left
			break
		}
		for _, b := range page {
			if n <= batches && total <= bytes {
				break
			}
			if first == 0 {
				first = b.id
			}
			cut, n, total = b.id, n-1, total-b.bytes
			dropped.Batches, dropped.Bytes = dropped.Batches+1, dropped.Bytes+b.bytes
		}
	}
	if dropped.Batches == 0 {
		return dropped, nil
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM feedback WHERE box = $1 AND id BETWEEN $2 AND $3", box, first, cut); err != nil {
		return store.FeedbackKept{}, err
	}
	_, err := tx.ExecContext(ctx, "UPDATE feedback_totals SET batches = batches - $1, bytes = bytes - $2 WHERE box = $3",
		dropped.Batches, dropped.Bytes, box)
	return dropped, err
}

// ListFeedback returns one page of q.Box's batches: oldest first from
// the ID after q.After, or newest first from the ID before it (the
// start when it is zero), and whether more follow. It asks for one batch
// past q.Limit to tell, and reads no body past the page's.
func (s *Store) ListFeedback(ctx context.Context, q store.FeedbackQuery) ([]store.FeedbackBatch, bool, error) {
	op := fmt.Sprintf("list feedback of box %q", q.Box)
	if q.Limit < 1 || q.Limit > store.MaxFeedbackPage {
		return nil, false, fmt.Errorf("%s: limit %d is not 1 to %d", op, q.Limit, store.MaxFeedbackPage)
	}
	where, order, after := "id > $2", "id", q.After
	if q.NewestFirst {
		where, order = "id < $2", "id DESC"
		if after <= 0 {
			after = math.MaxInt64
		}
	}
	rows, err := s.R.QueryContext(ctx, "SELECT id, at, "+s.D.WordsJSON("words")+", body FROM feedback WHERE box = $1 AND "+where+" ORDER BY "+order+" LIMIT $3",
		q.Box, after, q.Limit+1)
	if err != nil {
		return nil, false, s.D.Translate(op, err)
	}
	defer rows.Close()
	var page []store.FeedbackBatch
	var bytes int64
	for rows.Next() {
		if len(page) == q.Limit || (q.MaxBytes > 0 && bytes >= q.MaxBytes) {
			return page, true, nil
		}
		f := store.FeedbackBatch{Box: q.Box}
		var words string
		if err := rows.Scan(&f.ID, Time(&f.At), &words, &f.Body); err != nil {
			return nil, false, s.D.Translate(op, err)
		}
		if f.Words, err = decodeWords(words); err != nil {
			return nil, false, fmt.Errorf("%s: batch %d: %w", op, f.ID, err)
		}
		page = append(page, f)
		bytes += int64(len(f.Body))
	}
	if err := rows.Err(); err != nil {
		return nil, false, s.D.Translate(op, err)
	}
	return page, false, nil
}

// CountFeedback returns how many batches box keeps and their bodies'
// bytes.
func (s *Store) CountFeedback(ctx context.Context, box string) (store.FeedbackKept, error) {
	// At most one row: MAX reads it, and makes it zero when there is none.
	return one(ctx, s, func() string { return fmt.Sprintf("count feedback of box %q", box) },
		"SELECT COALESCE(MAX(batches), 0), COALESCE(MAX(bytes), 0) FROM feedback_totals WHERE box = $1",
		func(r Scanner) (store.FeedbackKept, error) {
			var k store.FeedbackKept
			err := r.Scan(&k.Batches, &k.Bytes)
			return k, err
		}, box)
}

// AddResource records r as r.Box's: store.ErrExists if another box owns
// r.Kind/r.ID, store.ErrNotFound if there is no box named r.Box. Recording
// it again for the same box changes nothing and is not an error.
func (s *Store) AddResource(ctx context.Context, r store.Resource) error {
	return s.addResource(ctx, r, nil)
}

// AddBoxResource records r, which a request of r.Box admitted with the
// token that hashes to tokenHash made, as r.Box's, as AddResource does,
// only while the box holds that token: store.ErrNotFound if no box named
// r.Box holds it (store.ErrGraceEnded, store.ErrTokenExpired as for
// SaveDeclaration).
func (s *Store) AddBoxResource(ctx context.Context, r store.Resource, tokenHash string) error {
	return s.addResource(ctx, r, func(tx *sql.Tx) error {
		// The resource is the box's that holds the token its request
		// was admitted with: a box added under the name of one removed
		// meanwhile did not make it, and is not to own it.
		return s.holdsToken(ctx, tx, r.Box, tokenHash)
	})
}

// addResource is AddResource, and AddBoxResource when held, run first in
// the same write, checks that the box may own r.
func (s *Store) addResource(ctx context.Context, r store.Resource, held func(*sql.Tx) error) error {
	key := r.Kind + "/" + r.ID
	return s.Write(ctx, fmt.Sprintf("add resource %q for box %q", key, r.Box), func(tx *sql.Tx) ([]store.Change, error) {
		if held != nil {
			if err := held(tx); err != nil {
				return nil, err
			}
		}
		n, err := affected(ctx, tx, "INSERT INTO resources (kind, id, box, at) VALUES ($1, $2, $3, $4) ON CONFLICT (kind, id) DO NOTHING",
			r.Kind, r.ID, r.Box, s.D.Time(r.At))
		if err != nil || n == 1 {
			return []store.Change{{Kind: store.ChangeResource, Key: key}}, err
		}
		var owner string
		if err := tx.QueryRowContext(ctx, "SELECT box FROM resources WHERE kind = $1 AND id = $2", r.Kind, r.ID).Scan(&owner); err != nil {
			return nil, err
		}
		if owner != r.Box {
			return nil, store.ErrExists
		}
		return nil, nil
	})
}

// ResourceOwner returns the box that owns kind/id, or store.ErrNotFound.
func (s *Store) ResourceOwner(ctx context.Context, kind, id string) (string, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("owner of resource %q", kind+"/"+id) }, "SELECT box FROM resources WHERE kind = $1 AND id = $2", value[string], kind, id)
}

// ResourceOwnerOfToken returns the box that owns kind/id as
// ResourceOwner does, read while the box named box holds the token that
// hashes to tokenHash (tokenHeld), in the same statement:
// store.ErrNotFound otherwise.
func (s *Store) ResourceOwnerOfToken(ctx context.Context, box, tokenHash, kind, id string) (string, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("owner of resource %q", kind+"/"+id) },
		"SELECT box FROM resources WHERE kind = $1 AND id = $2 AND "+s.tokenHeld("$3", "$4"), value[string], kind, id, box, tokenHash)
}

// ListResources returns the resources of box, by kind and ID.
func (s *Store) ListResources(ctx context.Context, box string) ([]store.Resource, error) {
	return s.listResources(ctx, box, "")
}

// ListResourcesOfToken returns the resources of box as ListResources
// does, read while the box holds the token that hashes to tokenHash
// (tokenHeld), in the same statement: none otherwise.
func (s *Store) ListResourcesOfToken(ctx context.Context, box, tokenHash string) ([]store.Resource, error) {
	return s.listResources(ctx, box, tokenHash)
}

// listResources is ListResources, and ListResourcesOfToken when
// tokenHash is not "".
func (s *Store) listResources(ctx context.Context, box, tokenHash string) ([]store.Resource, error) {
	where, args := "box = $1", []any{box}
	if tokenHash != "" {
		where, args = where+" AND "+s.tokenHeld("$1", "$2"), append(args, tokenHash)
	}
	return collect(ctx, s, fmt.Sprintf("list resources of box %q", box), "SELECT kind, id, at FROM resources WHERE "+where+" ORDER BY kind"+s.D.Collate()+", id"+s.D.Collate(),
		func(r Scanner) (store.Resource, error) {
			res := store.Resource{Box: box}
			err := r.Scan(&res.Kind, &res.ID, Time(&res.At))
			return res, err
		}, args...)
}

// DeleteResource forgets kind/id; store.ErrNotFound if unknown.
func (s *Store) DeleteResource(ctx context.Context, kind, id string) error {
	key := kind + "/" + id
	return s.touch(ctx, fmt.Sprintf("delete resource %q", key), []store.Change{{Kind: store.ChangeResource, Key: key}},
		"DELETE FROM resources WHERE kind = $1 AND id = $2", kind, id)
}

const grantColumns = "id, hash, box, principal, created_at, expires_at, revoked_at"

func scanGrant(r Scanner) (store.Grant, error) {
	var g store.Grant
	err := r.Scan(&g.ID, &g.Hash, &g.Box, &g.Principal, Time(&g.CreatedAt), Time(&g.ExpiresAt), Time(&g.RevokedAt))
	return g, err
}

// CreateGrant stores g: store.ErrExists if its ID or hash is taken,
// store.ErrNotFound if there is no box named g.Box. A zero ExpiresAt or
// RevokedAt is kept as zero.
func (s *Store) CreateGrant(ctx context.Context, g store.Grant) error {
	return s.put(ctx, fmt.Sprintf("create grant %q for box %q", g.ID, g.Box), []store.Change{{Kind: store.ChangeGrant, Key: g.Hash}},
		"INSERT INTO grants ("+grantColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7)",
		g.ID, g.Hash, g.Box, g.Principal, s.D.Time(g.CreatedAt), s.NullTime(g.ExpiresAt), s.NullTime(g.RevokedAt))
}

// GrantByHash returns the grant whose value hashes to hash, or
// store.ErrNotFound. An expired or revoked grant is returned as it is.
func (s *Store) GrantByHash(ctx context.Context, hash string) (store.Grant, error) {
	return one(ctx, s, func() string { return "grant by hash" }, "SELECT "+grantColumns+" FROM grants WHERE hash = $1", scanGrant, hash)
}

// ListGrants returns the grants of box, newest first (by CreatedAt, then ID).
func (s *Store) ListGrants(ctx context.Context, box string) ([]store.Grant, error) {
	return collect(ctx, s, fmt.Sprintf("list grants of box %q", box), "SELECT "+grantColumns+" FROM grants WHERE box = $1 ORDER BY created_at DESC, id"+s.D.Collate()+" DESC",
		scanGrant, box)
}

// RevokeGrant marks the grant id revoked at at; store.ErrNotFound if none.
// A grant already revoked keeps its first revocation time.
func (s *Store) RevokeGrant(ctx context.Context, id string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %q: zero revocation time", id)
	}
	return s.Write(ctx, fmt.Sprintf("revoke grant %q", id), func(tx *sql.Tx) ([]store.Change, error) {
		var hash string
		err := tx.QueryRowContext(ctx, "UPDATE grants SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 RETURNING hash",
			s.D.Time(at), id).Scan(&hash)
		return []store.Change{{Kind: store.ChangeGrant, Key: hash}}, err
	})
}

// changesSince is ChangesSince's query, which every replica's cache polls
// many times a second: prepared once, on R, by New.
const changesSince = "SELECT seq, kind, key FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2"

// ChangesSince returns up to limit changes with Seq > after, in Seq order.
// limit must be positive.
func (s *Store) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("changes since %d: limit %d is not positive", after, limit)
	}
	rows, err := s.changes.QueryContext(ctx, after, limit)
	out, err := rowsOf(rows, err, func(r Scanner) (store.Change, error) {
		var c store.Change
		err := r.Scan(&c.Seq, &c.Kind, &c.Key)
		return c, err
	})
	if err != nil {
		return nil, s.D.Translate("changes", err)
	}
	return out, nil
}

// LastChange returns the highest Seq written so far, 0 for none. Pruning
// never removes the newest change, so this never goes back.
func (s *Store) LastChange(ctx context.Context) (int64, error) {
	return one(ctx, s, func() string { return "last change" }, "SELECT COALESCE(MAX(seq), 0) FROM changes", value[int64])
}

// PruneChanges forgets changes recorded more than keep ago by the
// database's clock (Dialect.Now), whatever the replica's, except the
// newest one, which LastChange reports.
func (s *Store) PruneChanges(ctx context.Context, keep time.Duration) error {
	return s.put(ctx, "prune changes", nil,
		"DELETE FROM changes WHERE at < "+s.D.Now(keep)+" AND seq < (SELECT MAX(seq) FROM changes)")
}
