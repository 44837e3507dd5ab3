package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

const boxColumns = "name, token_hash, created_at, consent, paused, payer_kind, payer_principal, bound_from, token_ttl, token_expires_at, old_token_hash, old_token_until"

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

func scanBox(r rowScanner) (store.Box, error) {
	var b store.Box
	var created, ttl int64
	var from string
	var expires, oldUntil sql.NullInt64
	var oldHash sql.NullString
	err := r.Scan(&b.Name, &b.TokenHash, &created, &b.Consent, &b.Paused, &b.PayerKind, &b.PayerPrincipal,
		&from, &ttl, &expires, &oldHash, &oldUntil)
	if err != nil {
		return b, err
	}
	b.CreatedAt = fromMicros(created)
	b.TokenTTL = time.Duration(ttl) * time.Microsecond
	b.ExpiresAt, b.OldTokenHash, b.OldUntil = fromNullMicros(expires), oldHash.String, fromNullMicros(oldUntil)
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
	return s.write(ctx, fmt.Sprintf("create box %q", b.Name), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO boxes ("+boxColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
			b.Name, b.TokenHash, micros(b.CreatedAt), b.Consent, b.Paused, kind, b.PayerPrincipal,
			store.FormatFrom(b.From), b.TokenTTL.Microseconds(), nullMicros(b.ExpiresAt))
		return []store.Change{{Kind: store.ChangeBox, Key: b.Name}}, err
	})
}

// Box returns the box named name, or store.ErrNotFound.
func (s *Store) Box(ctx context.Context, name string) (store.Box, error) {
	b, err := scanBox(s.r.QueryRowContext(ctx, "SELECT "+boxColumns+" FROM boxes WHERE name = ?", name))
	if err != nil {
		return store.Box{}, translate(fmt.Sprintf("box %q", name), err)
	}
	return b, nil
}

// BoxByTokenHash returns the box whose token hashes to hash, or store.ErrNotFound.
func (s *Store) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	b, err := scanBox(s.r.QueryRowContext(ctx, "SELECT "+boxColumns+" FROM boxes WHERE token_hash = ? OR old_token_hash = ?", hash, hash))
	if err != nil {
		return store.Box{}, translate("box by token hash", err)
	}
	return b, nil
}

// ListBoxes returns every box, by name.
func (s *Store) ListBoxes(ctx context.Context) ([]store.Box, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+boxColumns+" FROM boxes ORDER BY name")
	if err != nil {
		return nil, translate("list boxes", err)
	}
	defer rows.Close()
	var boxes []store.Box
	for rows.Next() {
		b, err := scanBox(rows)
		if err != nil {
			return nil, translate("list boxes", err)
		}
		boxes = append(boxes, b)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list boxes", err)
	}
	return boxes, nil
}

// DeleteBox removes the box named name with its declaration, secrets,
// feedback, resources and grants, recording a change for each that a cache
// may hold; store.ErrNotFound if there is no such box.
func (s *Store) DeleteBox(ctx context.Context, name string) error {
	return s.write(ctx, fmt.Sprintf("delete box %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		var exists int
		if err := tx.QueryRowContext(ctx, "SELECT 1 FROM boxes WHERE name = ?", name).Scan(&exists); err != nil {
			return nil, err
		}
		changes := []store.Change{{Kind: store.ChangeBox, Key: name}}
		keyed := []struct {
			kind, query string
		}{
			{store.ChangeDeclaration, "DELETE FROM declarations WHERE box = ? RETURNING box"},
			{store.ChangeSecret, "DELETE FROM secrets WHERE box = ? RETURNING box || '/' || name"},
			{store.ChangeResource, "DELETE FROM resources WHERE box = ? RETURNING kind || '/' || id"},
			{store.ChangeGrant, "DELETE FROM grants WHERE box = ? RETURNING hash"},
		}
		for _, k := range keyed {
			keys, err := queryStrings(ctx, tx, k.query, name)
			if err != nil {
				return nil, err
			}
			for _, key := range keys {
				changes = append(changes, store.Change{Kind: k.kind, Key: key})
			}
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM feedback WHERE box = ?", name); err != nil {
			return nil, err
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM boxes WHERE name = ?", name)
		if err != nil {
			return nil, err
		}
		return changes, notFound(res)
	})
}

// queryStrings runs a query whose rows are one string each.
func queryStrings(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// RotateToken replaces the token hash of the box named name at once;
// store.ErrNotFound if there is no such box, store.ErrExists if another box
// has that hash.
func (s *Store) RotateToken(ctx context.Context, name, newHash string) error {
	return s.write(ctx, fmt.Sprintf("rotate token of box %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "UPDATE boxes SET token_hash = ?, old_token_hash = NULL, old_token_until = NULL WHERE name = ?", newHash, name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBox, Key: name}}, notFound(res)
	})
}

// ReplaceToken replaces the token of the box named name as r says;
// store.ErrNotFound if there is no such box, store.ErrExists if another
// box has that hash.
func (s *Store) ReplaceToken(ctx context.Context, name string, r store.Rotation) error {
	return s.write(ctx, fmt.Sprintf("replace token of box %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		// The old token is kept through the grace, but never past its
		// own expiry: the columns on the right are the row's before.
		res, err := tx.ExecContext(ctx, `UPDATE boxes SET token_hash = ?, token_ttl = ?, token_expires_at = ?,
			old_token_hash = CASE WHEN ? IS NULL THEN NULL ELSE token_hash END,
			old_token_until = CASE WHEN ? IS NULL THEN NULL WHEN token_expires_at IS NOT NULL AND token_expires_at < ? THEN token_expires_at ELSE ? END
			WHERE name = ?`,
			r.Hash, r.TTL.Microseconds(), nullMicros(r.ExpiresAt),
			nullMicros(r.GraceUntil), nullMicros(r.GraceUntil), nullMicros(r.GraceUntil), nullMicros(r.GraceUntil), name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBox, Key: name}}, notFound(res)
	})
}

// BindBox binds the token of the box named name to the source addresses
// from (nil: any); store.ErrNotFound if there is no such box.
func (s *Store) BindBox(ctx context.Context, name string, from []netip.Prefix) error {
	return s.write(ctx, fmt.Sprintf("bind box %q", name), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "UPDATE boxes SET bound_from = ? WHERE name = ?", store.FormatFrom(from), name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBox, Key: name}}, notFound(res)
	})
}

// UpdateBox writes b's Consent, Paused, PayerKind (empty meaning "shared")
// and PayerPrincipal; store.ErrNotFound if there is no box named b.Name.
func (s *Store) UpdateBox(ctx context.Context, b store.Box) error {
	kind, err := payerKind(b.PayerKind)
	if err != nil {
		return fmt.Errorf("update box %q: %w", b.Name, err)
	}
	return s.write(ctx, fmt.Sprintf("update box %q", b.Name), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "UPDATE boxes SET consent = ?, paused = ?, payer_kind = ?, payer_principal = ? WHERE name = ?",
			b.Consent, b.Paused, kind, b.PayerPrincipal, b.Name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeBox, Key: b.Name}}, notFound(res)
	})
}

// SaveDeclaration replaces the last report of the box named box with doc,
// taken at at; store.ErrNotFound if there is no such box.
func (s *Store) SaveDeclaration(ctx context.Context, box string, doc []byte, at time.Time) error {
	return s.write(ctx, fmt.Sprintf("save declaration of box %q", box), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO declarations (box, doc, at) VALUES (?, ?, ?)
			ON CONFLICT (box) DO UPDATE SET doc = excluded.doc, at = excluded.at`,
			box, blob(doc), micros(at))
		return []store.Change{{Kind: store.ChangeDeclaration, Key: box}}, err
	})
}

// Declaration returns the last report kept for the box named box and when
// it was taken, or store.ErrNotFound if it never reported.
func (s *Store) Declaration(ctx context.Context, box string) ([]byte, time.Time, error) {
	var doc []byte
	var at int64
	err := s.r.QueryRowContext(ctx, "SELECT doc, at FROM declarations WHERE box = ?", box).Scan(&doc, &at)
	if err != nil {
		return nil, time.Time{}, translate(fmt.Sprintf("declaration of box %q", box), err)
	}
	return doc, fromMicros(at), nil
}
