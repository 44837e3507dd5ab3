package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

const boxColumns = "name, token_hash, created_at, consent, paused, payer_kind, payer_principal, bound_from, token_ttl, token_expires_at, old_token_hash, old_token_until"

// Scanner is a *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

func scanBox(r Scanner) (store.Box, error) {
	var b store.Box
	var ttl int64
	var from string
	var oldHash sql.NullString
	err := r.Scan(&b.Name, &b.TokenHash, Time(&b.CreatedAt), &b.Consent, &b.Paused, &b.PayerKind, &b.PayerPrincipal,
		&from, &ttl, Time(&b.ExpiresAt), &oldHash, Time(&b.OldUntil))
	if err != nil {
		return b, err
	}
	b.TokenTTL = time.Duration(ttl) * time.Microsecond
	b.OldTokenHash = oldHash.String
	if b.From, err = store.ParseFrom(from); err != nil {
		return b, fmt.Errorf("box %q: %w", b.Name, err)
	}
	return b, nil
}

// payerKind is k as stored: "shared" when empty; an error unless shared or owner.
func payerKind(k string) (string, error) {
	switch k {
	case "":
		return "shared", nil
	case "shared", "owner":
		return k, nil
	}
	return "", fmt.Errorf("payer kind %q is neither shared nor owner", k)
}

// CreateBox adds b; store.ErrExists if its name or token hash is taken. An
// empty PayerKind is stored as "shared".
func (s *Store) CreateBox(ctx context.Context, b store.Box) error {
	kind, err := payerKind(b.PayerKind)
	if err != nil {
		return fmt.Errorf("create box %q: %w", b.Name, err)
	}
	return s.put(ctx, fmt.Sprintf("create box %q", b.Name), []store.Change{{Kind: store.ChangeBox, Key: b.Name}},
		"INSERT INTO boxes ("+boxColumns+") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL, NULL)",
		b.Name, b.TokenHash, s.D.Time(b.CreatedAt), b.Consent, b.Paused, kind, b.PayerPrincipal,
		store.FormatFrom(b.From), b.TokenTTL.Microseconds(), s.NullTime(b.ExpiresAt))
}

// Box returns the box named name, or store.ErrNotFound.
func (s *Store) Box(ctx context.Context, name string) (store.Box, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("box %q", name) }, "SELECT "+boxColumns+" FROM boxes WHERE name = $1", scanBox, name)
}

// BoxByTokenHash returns the box whose token hashes to hash, or store.ErrNotFound.
func (s *Store) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	return one(ctx, s, func() string { return "box by token hash" }, "SELECT "+boxColumns+" FROM boxes WHERE token_hash = $1 OR old_token_hash = $1", scanBox, hash)
}

// ListBoxes returns every box, by name.
func (s *Store) ListBoxes(ctx context.Context) ([]store.Box, error) {
	return collect(ctx, s, "list boxes", "SELECT "+boxColumns+" FROM boxes ORDER BY name"+s.D.Collate(), scanBox)
}

// DeleteBox removes the box named name with its declaration, secrets,
// feedback, resources and grants, recording a change for each that a cache
// may hold; store.ErrNotFound if there is no such box.
func (s *Store) DeleteBox(ctx context.Context, name string) error {
	return s.Write(ctx, fmt.Sprintf("delete box %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		var exists int
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM boxes WHERE name = $1"+s.D.ForUpdate(), name).Scan(&exists); err != nil {
			return nil, err
		}
		changes := []store.Change{{Kind: store.ChangeBox, Key: name}}
		keyed := []struct {
			kind, query string
		}{
			{store.ChangeDeclaration, "DELETE FROM declarations WHERE box = $1 RETURNING box"},
			{store.ChangeSecret, "DELETE FROM secrets WHERE box = $1 RETURNING box || '/' || name"},
			{store.ChangeResource, "DELETE FROM resources WHERE box = $1 RETURNING kind || '/' || id"},
			{store.ChangeGrant, "DELETE FROM grants WHERE box = $1 RETURNING hash"},
		}
		for _, k := range keyed {
			keys, err := all(ctx, tx, k.query, value[string], name)
			if err != nil {
				return nil, err
			}
			for _, key := range keys {
				changes = append(changes, store.Change{Kind: k.kind, Key: key})
			}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM feedback WHERE box = $1", name); err != nil {
			return nil, err
		}
		return changes, touched(ctx, tx, "DELETE FROM boxes WHERE name = $1", name)
	})
}

// RotateToken replaces the token hash of the box named name at once;
// store.ErrNotFound if there is no such box, store.ErrExists if another box
// has that hash.
func (s *Store) RotateToken(ctx context.Context, name, newHash string) error {
	return s.touch(ctx, fmt.Sprintf("rotate token of box %q", name), []store.Change{{Kind: store.ChangeBox, Key: name}},
		"UPDATE boxes SET token_hash = $1, old_token_hash = NULL, old_token_until = NULL WHERE name = $2", newHash, name)
}

// ReplaceToken replaces the token of the box named name as r says;
// store.ErrNotFound if there is no such box, store.ErrExists if another
// box has that hash.
func (s *Store) ReplaceToken(ctx context.Context, name string, r store.Rotation) error {
	// The old token is kept through the grace, but never past its own
	// expiry: the columns on the right are the row's before.
	return s.touch(ctx, fmt.Sprintf("replace token of box %q", name), []store.Change{{Kind: store.ChangeBox, Key: name}},
		`UPDATE boxes SET token_hash = $1, token_ttl = $2, token_expires_at = $3,
			old_token_hash = CASE WHEN $4 THEN NULL ELSE token_hash END,
			old_token_until = CASE WHEN $4 THEN NULL WHEN token_expires_at IS NOT NULL AND token_expires_at < $5 THEN token_expires_at ELSE $5 END
			WHERE name = $6`,
		r.Hash, r.TTL.Microseconds(), s.NullTime(r.ExpiresAt), r.GraceUntil.IsZero(), s.NullTime(r.GraceUntil), name)
}

// BindBox binds the token of the box named name to the source addresses
// from (nil: any); store.ErrNotFound if there is no such box.
func (s *Store) BindBox(ctx context.Context, name string, from []netip.Prefix) error {
	return s.touch(ctx, fmt.Sprintf("bind box %q", name), []store.Change{{Kind: store.ChangeBox, Key: name}},
		"UPDATE boxes SET bound_from = $1 WHERE name = $2", store.FormatFrom(from), name)
}

// UpdateBox writes b's Consent, Paused, PayerKind (empty meaning "shared")
// and PayerPrincipal; store.ErrNotFound if there is no box named b.Name.
func (s *Store) UpdateBox(ctx context.Context, b store.Box) error {
	kind, err := payerKind(b.PayerKind)
	if err != nil {
		return fmt.Errorf("update box %q: %w", b.Name, err)
	}
	return s.touch(ctx, fmt.Sprintf("update box %q", b.Name), []store.Change{{Kind: store.ChangeBox, Key: b.Name}},
		"UPDATE boxes SET consent = $1, paused = $2, payer_kind = $3, payer_principal = $4 WHERE name = $5",
		b.Consent, b.Paused, kind, b.PayerPrincipal, b.Name)
}

// ChangeBox changes the settings of the box named name that c holds, in
// one statement: each other column keeps what it holds as it runs.
// store.ErrNotFound if there is no such box.
func (s *Store) ChangeBox(ctx context.Context, name string, c store.BoxChange) error {
	var consent, paused, kind, principal any
	if c.Consent != nil {
		consent = *c.Consent
	}
	if c.Paused != nil {
		paused = *c.Paused
	}
	if c.PayerKind != nil {
		k, err := payerKind(*c.PayerKind)
		if err != nil {
			return fmt.Errorf("change box %q: %w", name, err)
		}
		kind, principal = k, c.PayerPrincipal
	}
	return s.touch(ctx, fmt.Sprintf("change box %q", name), []store.Change{{Kind: store.ChangeBox, Key: name}},
		`UPDATE boxes SET consent = COALESCE($1, consent), paused = COALESCE($2, paused),
			payer_kind = COALESCE($3, payer_kind), payer_principal = COALESCE($4, payer_principal) WHERE name = $5`,
		consent, paused, kind, principal, name)
}

// SaveDeclaration replaces the last report of the box named box with doc,
// taken at at, unless the report kept was taken later, and returns the
// report kept as the write commits; store.ErrNotFound if there is no
// such box holding the token that hashes to tokenHash (its token, or the
// one it had before its last rotation), store.ErrGraceEnded if tokenHash
// is the one before the rotation and its grace has ended by the
// database's clock, store.ErrTokenExpired if tokenHash is the box's token
// and its expiry has come by the database's clock.
func (s *Store) SaveDeclaration(ctx context.Context, box, tokenHash string, doc []byte, at time.Time) (store.KeptDeclaration, error) {
	var kept store.KeptDeclaration
	err := s.Write(ctx, fmt.Sprintf("save declaration of box %q", box), func(tx *sql.Tx) ([]store.Change, error) {
		// The report is the box's that holds the token it was admitted
		// with: a box removed meanwhile, and one added under its name
		// since, is not that box.
		if err := s.holdsToken(ctx, tx, box, tokenHash); err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO declarations (box, doc, at) VALUES ($1, $2, $3)
			ON CONFLICT (box) DO UPDATE SET doc = excluded.doc, at = excluded.at WHERE declarations.at <= excluded.at`,
			box, Blob(doc), s.D.Time(at)); err != nil {
			return nil, err
		}
		// The row is this write's until it commits, whether the upsert
		// changed it or not (PostgreSQL locks a row its ON CONFLICT
		// finds even when the WHERE leaves it; SQLite's write holds
		// the whole database): what it holds now is what is kept.
		err := tx.QueryRowContext(ctx, "SELECT doc, at FROM declarations WHERE box = $1", box).Scan(&kept.Doc, Time(&kept.At))
		return []store.Change{{Kind: store.ChangeDeclaration, Key: box}}, err
	})
	if err != nil {
		return store.KeptDeclaration{}, err
	}
	return kept, nil
}

// holdsToken returns nil if the box named box holds the token that
// hashes to tokenHash, as a write made on behalf of a request admitted
// with that token runs, in tx: its token, before its expiry (if it has
// one), or the token before its last rotation, within the grace, both
// by the database's clock as the check runs (the broker judged both as
// it admitted the request, and a write made after either ended is one
// of a token no longer taken). sql.ErrNoRows (store.ErrNotFound once
// Write returns it) if no box of that name holds it: a box removed
// meanwhile, and one added under its name since, is not that box;
// store.ErrGraceEnded, store.ErrTokenExpired. The box's row is held
// until tx commits (SQLite's write holds the whole database), so that
// neither a removal nor a rotation comes between this check and the
// write it guards.
func (s *Store) holdsToken(ctx context.Context, tx *sql.Tx, box, tokenHash string) error {
	now := s.D.Now(0)
	var held int
	if err := tx.QueryRowContext(ctx, `SELECT CASE
			WHEN token_hash = $2 THEN CASE WHEN token_expires_at IS NULL OR token_expires_at > `+now+` THEN 1 ELSE 2 END
			WHEN old_token_until > `+now+` THEN 1 ELSE 0 END
		FROM boxes WHERE name = $1 AND (token_hash = $2 OR old_token_hash = $2)`+s.D.ForUpdate(),
		box, tokenHash).Scan(&held); err != nil {
		return err
	}
	switch held {
	case 0:
		return store.ErrGraceEnded
	case 2:
		return store.ErrTokenExpired
	}
	return nil
}

// tokenHeld is the condition that the box named by the parameter box
// holds the token that hashes to the parameter hash (both "$n"), as
// holdsToken judges it, by the database's clock as the statement runs:
// for a read made on behalf of a request admitted with that token, so
// that what it reads by the box's name is read only while the box that
// holds the token has that name, in the same statement.
func (s *Store) tokenHeld(box, hash string) string {
	now := s.D.Now(0)
	return "EXISTS (SELECT 1 FROM boxes WHERE name = " + box + " AND ((token_hash = " + hash + " AND (token_expires_at IS NULL OR token_expires_at > " + now + "))" +
		" OR (old_token_hash = " + hash + " AND old_token_until > " + now + ")))"
}

// Declaration returns the last report kept for the box named box and when
// it was taken, or store.ErrNotFound if it never reported.
func (s *Store) Declaration(ctx context.Context, box string) ([]byte, time.Time, error) {
	d, err := one(ctx, s, func() string { return fmt.Sprintf("declaration of box %q", box) }, "SELECT doc, at FROM declarations WHERE box = $1", func(r Scanner) (store.KeptDeclaration, error) {
		var d store.KeptDeclaration
		err := r.Scan(&d.Doc, Time(&d.At))
		return d, err
	}, box)
	return d.Doc, d.At, err
}

// DeclarationOfToken returns the last report kept for the box named box,
// read while it holds the token that hashes to tokenHash (tokenHeld), and
// when it was taken: doc nil if it never reported, store.ErrNotFound if
// no box of that name holds the token.
func (s *Store) DeclarationOfToken(ctx context.Context, box, tokenHash string) ([]byte, time.Time, error) {
	d, err := one(ctx, s, func() string { return fmt.Sprintf("declaration of box %q", box) },
		"SELECT d.doc, d.at FROM (SELECT 1 AS one) AS held LEFT JOIN declarations d ON d.box = $1 WHERE "+s.tokenHeld("$1", "$2"),
		func(r Scanner) (store.KeptDeclaration, error) {
			var d store.KeptDeclaration
			err := r.Scan(&d.Doc, Time(&d.At))
			return d, err
		}, box, tokenHash)
	return d.Doc, d.At, err
}
