package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetCredential creates or replaces the credential c.ID.
func (s *Store) SetCredential(ctx context.Context, c store.Credential) error {
	return s.write(ctx, fmt.Sprintf("set credential %q", c.ID), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO credentials (id, sealed, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
			c.ID, blob(c.Sealed), micros(c.UpdatedAt))
		return []store.Change{{Kind: store.ChangeCredential, Key: c.ID}}, err
	})
}

// Credential returns the credential with that ID, or store.ErrNotFound.
func (s *Store) Credential(ctx context.Context, id string) (store.Credential, error) {
	c := store.Credential{ID: id}
	var at int64
	err := s.r.QueryRowContext(ctx, "SELECT sealed, updated_at FROM credentials WHERE id = ?", id).Scan(&c.Sealed, &at)
	if err != nil {
		return store.Credential{}, translate(fmt.Sprintf("credential %q", id), err)
	}
	c.UpdatedAt = fromMicros(at)
	return c, nil
}

// DeleteCredential removes the credential with that ID; store.ErrNotFound if none.
func (s *Store) DeleteCredential(ctx context.Context, id string) error {
	return s.write(ctx, fmt.Sprintf("delete credential %q", id), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM credentials WHERE id = ?", id)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeCredential, Key: id}}, notFound(res)
	})
}

// ListCredentials returns every credential's ID and UpdatedAt, by ID,
// Sealed left nil.
func (s *Store) ListCredentials(ctx context.Context) ([]store.Credential, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT id, updated_at FROM credentials ORDER BY id")
	if err != nil {
		return nil, translate("list credentials", err)
	}
	defer rows.Close()
	var out []store.Credential
	for rows.Next() {
		var c store.Credential
		var at int64
		if err := rows.Scan(&c.ID, &at); err != nil {
			return nil, translate("list credentials", err)
		}
		c.UpdatedAt = fromMicros(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list credentials", err)
	}
	return out, nil
}

// SetSecret creates or replaces the secret sec.Name of box sec.Box;
// store.ErrNotFound if there is no such box.
func (s *Store) SetSecret(ctx context.Context, sec store.Secret) error {
	return s.write(ctx, fmt.Sprintf("set secret %q of box %q", sec.Name, sec.Box), func(tx *sql.Tx) ([]store.Change, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO secrets (box, name, host, sealed, updated_at, kind, body_fields, rules, rate) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (box, name) DO UPDATE SET host = excluded.host, sealed = excluded.sealed, updated_at = excluded.updated_at, kind = excluded.kind, body_fields = excluded.body_fields, rules = excluded.rules, rate = excluded.rate`,
			sec.Box, sec.Name, sec.Host, blob(sec.Sealed), micros(sec.UpdatedAt), sec.Kind, store.JoinBodyFields(sec.BodyFields), store.JoinRules(sec.Rules), sec.Rate)
		return []store.Change{{Kind: store.ChangeSecret, Key: sec.Box + "/" + sec.Name}}, err
	})
}

// Secret returns the secret name of box, or store.ErrNotFound.
func (s *Store) Secret(ctx context.Context, box, name string) (store.Secret, error) {
	sec := store.Secret{Box: box, Name: name}
	var at int64
	var fields, rules string
	err := s.r.QueryRowContext(ctx, "SELECT host, sealed, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = ? AND name = ?", box, name).
		Scan(&sec.Host, &sec.Sealed, &at, &sec.Kind, &fields, &rules, &sec.Rate)
	if err != nil {
		return store.Secret{}, translate(fmt.Sprintf("secret %q of box %q", name, box), err)
	}
	sec.UpdatedAt = fromMicros(at)
	sec.BodyFields = store.SplitBodyFields(fields)
	sec.Rules = store.SplitRules(rules)
	return sec, nil
}

// ListSecrets returns the secrets of box, by name, Sealed left nil.
func (s *Store) ListSecrets(ctx context.Context, box string) ([]store.Secret, error) {
	op := fmt.Sprintf("list secrets of box %q", box)
	rows, err := s.r.QueryContext(ctx, "SELECT name, host, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = ? ORDER BY name", box)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []store.Secret
	for rows.Next() {
		sec := store.Secret{Box: box}
		var at int64
		var fields, rules string
		if err := rows.Scan(&sec.Name, &sec.Host, &at, &sec.Kind, &fields, &rules, &sec.Rate); err != nil {
			return nil, translate(op, err)
		}
		sec.UpdatedAt = fromMicros(at)
		sec.BodyFields = store.SplitBodyFields(fields)
		sec.Rules = store.SplitRules(rules)
		out = append(out, sec)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// DeleteSecret removes the secret name of box; store.ErrNotFound if none.
func (s *Store) DeleteSecret(ctx context.Context, box, name string) error {
	return s.write(ctx, fmt.Sprintf("delete secret %q of box %q", name, box), func(tx *sql.Tx) ([]store.Change, error) {
		res, err := tx.ExecContext(ctx, "DELETE FROM secrets WHERE box = ? AND name = ?", box, name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeSecret, Key: box + "/" + name}}, notFound(res)
	})
}
