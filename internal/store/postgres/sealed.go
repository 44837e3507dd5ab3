package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// SetCredential creates or replaces the credential c.ID.
func (s *Store) SetCredential(ctx context.Context, c store.Credential) error {
	return s.write(ctx, fmt.Sprintf("set credential %q", c.ID), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, `INSERT INTO credentials (id, sealed, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
			c.ID, bytea(c.Sealed), c.UpdatedAt)
		return []store.Change{{Kind: store.ChangeCredential, Key: c.ID}}, err
	})
}

// Credential returns the credential with that ID, or store.ErrNotFound.
func (s *Store) Credential(ctx context.Context, id string) (store.Credential, error) {
	c := store.Credential{ID: id}
	err := s.pool.QueryRow(ctx, "SELECT sealed, updated_at FROM credentials WHERE id = $1", id).Scan(&c.Sealed, &c.UpdatedAt)
	if err != nil {
		return store.Credential{}, translate(fmt.Sprintf("credential %q", id), err)
	}
	c.UpdatedAt = c.UpdatedAt.UTC()
	return c, nil
}

// DeleteCredential removes the credential with that ID; store.ErrNotFound if none.
func (s *Store) DeleteCredential(ctx context.Context, id string) error {
	return s.write(ctx, fmt.Sprintf("delete credential %q", id), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM credentials WHERE id = $1", id)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeCredential, Key: id}}, notFound(tag)
	})
}

// ListCredentials returns every credential's ID and UpdatedAt, by ID,
// Sealed left nil.
func (s *Store) ListCredentials(ctx context.Context) ([]store.Credential, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, updated_at FROM credentials ORDER BY id COLLATE "C"`)
	if err != nil {
		return nil, translate("list credentials", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Credential, error) {
		var c store.Credential
		err := r.Scan(&c.ID, &c.UpdatedAt)
		c.UpdatedAt = c.UpdatedAt.UTC()
		return c, err
	})
	if err != nil {
		return nil, translate("list credentials", err)
	}
	return out, nil
}

// SetSecret creates or replaces the secret sec.Name of box sec.Box;
// store.ErrNotFound if there is no such box.
func (s *Store) SetSecret(ctx context.Context, sec store.Secret) error {
	return s.write(ctx, fmt.Sprintf("set secret %q of box %q", sec.Name, sec.Box), func(tx pgx.Tx) ([]store.Change, error) {
		_, err := tx.Exec(ctx, `INSERT INTO secrets (box, name, host, sealed, updated_at, kind, body_fields, rules, rate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (box, name) DO UPDATE SET host = excluded.host, sealed = excluded.sealed, updated_at = excluded.updated_at, kind = excluded.kind, body_fields = excluded.body_fields, rules = excluded.rules, rate = excluded.rate`,
			sec.Box, sec.Name, sec.Host, bytea(sec.Sealed), sec.UpdatedAt, sec.Kind, store.JoinBodyFields(sec.BodyFields), store.JoinRules(sec.Rules), sec.Rate)
		return []store.Change{{Kind: store.ChangeSecret, Key: sec.Box + "/" + sec.Name}}, err
	})
}

// Secret returns the secret name of box, or store.ErrNotFound.
func (s *Store) Secret(ctx context.Context, box, name string) (store.Secret, error) {
	sec := store.Secret{Box: box, Name: name}
	var fields, rules string
	err := s.pool.QueryRow(ctx, "SELECT host, sealed, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = $1 AND name = $2", box, name).
		Scan(&sec.Host, &sec.Sealed, &sec.UpdatedAt, &sec.Kind, &fields, &rules, &sec.Rate)
	if err != nil {
		return store.Secret{}, translate(fmt.Sprintf("secret %q of box %q", name, box), err)
	}
	sec.UpdatedAt = sec.UpdatedAt.UTC()
	sec.BodyFields = store.SplitBodyFields(fields)
	sec.Rules = store.SplitRules(rules)
	return sec, nil
}

// ListSecrets returns the secrets of box, by name, Sealed left nil.
func (s *Store) ListSecrets(ctx context.Context, box string) ([]store.Secret, error) {
	op := fmt.Sprintf("list secrets of box %q", box)
	rows, err := s.pool.Query(ctx, `SELECT name, host, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = $1 ORDER BY name COLLATE "C"`, box)
	if err != nil {
		return nil, translate(op, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Secret, error) {
		sec := store.Secret{Box: box}
		var at time.Time
		var fields, rules string
		err := r.Scan(&sec.Name, &sec.Host, &at, &sec.Kind, &fields, &rules, &sec.Rate)
		sec.UpdatedAt = at.UTC()
		sec.BodyFields = store.SplitBodyFields(fields)
		sec.Rules = store.SplitRules(rules)
		return sec, err
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return out, nil
}

// DeleteSecret removes the secret name of box; store.ErrNotFound if none.
func (s *Store) DeleteSecret(ctx context.Context, box, name string) error {
	return s.write(ctx, fmt.Sprintf("delete secret %q of box %q", name, box), func(tx pgx.Tx) ([]store.Change, error) {
		tag, err := tx.Exec(ctx, "DELETE FROM secrets WHERE box = $1 AND name = $2", box, name)
		if err != nil {
			return nil, err
		}
		return []store.Change{{Kind: store.ChangeSecret, Key: box + "/" + name}}, notFound(tag)
	})
}
