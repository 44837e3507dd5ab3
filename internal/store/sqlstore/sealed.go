package sqlstore

import (
	"context"
	"fmt"

	"github.com/intentius/boxbroker/internal/store"
)

// SetCredential creates or replaces the credential c.ID.
func (s *Store) SetCredential(ctx context.Context, c store.Credential) error {
	return s.put(ctx, fmt.Sprintf("set credential %q", c.ID), []store.Change{{Kind: store.ChangeCredential, Key: c.ID}},
		`INSERT INTO credentials (id, sealed, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
		c.ID, Blob(c.Sealed), s.D.Time(c.UpdatedAt))
}

// Credential returns the credential with that ID, or store.ErrNotFound.
func (s *Store) Credential(ctx context.Context, id string) (store.Credential, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("credential %q", id) }, "SELECT id, sealed, updated_at FROM credentials WHERE id = $1", scanCredential, id)
}

// CredentialOfToken returns the credential with that ID as Credential
// does, read while the box named box holds the token that hashes to
// tokenHash (tokenHeld), in the same statement: store.ErrNotFound
// otherwise.
func (s *Store) CredentialOfToken(ctx context.Context, id, box, tokenHash string) (store.Credential, error) {
	return one(ctx, s, func() string { return fmt.Sprintf("credential %q of box %q", id, box) }, "SELECT id, sealed, updated_at FROM credentials WHERE id = $1 AND "+s.tokenHeld("$2", "$3"),
		scanCredential, id, box, tokenHash)
}

func scanCredential(r Scanner) (store.Credential, error) {
	var c store.Credential
	err := r.Scan(&c.ID, &c.Sealed, Time(&c.UpdatedAt))
	return c, err
}

// DeleteCredential removes the credential with that ID; store.ErrNotFound if none.
func (s *Store) DeleteCredential(ctx context.Context, id string) error {
	return s.touch(ctx, fmt.Sprintf("delete credential %q", id), []store.Change{{Kind: store.ChangeCredential, Key: id}},
		"DELETE FROM credentials WHERE id = $1", id)
}

// ListCredentials returns every credential's ID and UpdatedAt, by ID,
// Sealed left nil.
func (s *Store) ListCredentials(ctx context.Context) ([]store.Credential, error) {
	return collect(ctx, s, "list credentials", "SELECT id, updated_at FROM credentials ORDER BY id"+s.D.Collate(), func(r Scanner) (store.Credential, error) {
		var c store.Credential
		err := r.Scan(&c.ID, Time(&c.UpdatedAt))
		return c, err
	})
}

// SetSecret creates or replaces the secret sec.Name of box sec.Box;
// store.ErrNotFound if there is no such box.
func (s *Store) SetSecret(ctx context.Context, sec store.Secret) error {
	return s.put(ctx, fmt.Sprintf("set secret %q of box %q", sec.Name, sec.Box), []store.Change{{Kind: store.ChangeSecret, Key: sec.Box + "/" + sec.Name}},
		`INSERT INTO secrets (box, name, host, sealed, updated_at, kind, body_fields, rules, rate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (box, name) DO UPDATE SET host = excluded.host, sealed = excluded.sealed, updated_at = excluded.updated_at, kind = excluded.kind, body_fields = excluded.body_fields, rules = excluded.rules, rate = excluded.rate`,
		sec.Box, sec.Name, sec.Host, Blob(sec.Sealed), s.D.Time(sec.UpdatedAt), sec.Kind, store.JoinBodyFields(sec.BodyFields), store.JoinRules(sec.Rules), sec.Rate)
}

// Secret returns the secret name of box, or store.ErrNotFound.
func (s *Store) Secret(ctx context.Context, box, name string) (store.Secret, error) {
	return s.secret(ctx, box, name, "")
}

// SecretOfToken returns the secret name of box as Secret does, read
// while the box holds the token that hashes to tokenHash (tokenHeld), in
// the same statement: store.ErrNotFound otherwise.
func (s *Store) SecretOfToken(ctx context.Context, box, tokenHash, name string) (store.Secret, error) {
	return s.secret(ctx, box, name, tokenHash)
}

// secret is Secret, and SecretOfToken when tokenHash is not "".
func (s *Store) secret(ctx context.Context, box, name, tokenHash string) (store.Secret, error) {
	q, args := "SELECT host, sealed, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = $1 AND name = $2", []any{box, name}
	if tokenHash != "" {
		q, args = q+" AND "+s.tokenHeld("$1", "$3"), append(args, tokenHash)
	}
	return one(ctx, s, func() string { return fmt.Sprintf("secret %q of box %q", name, box) }, q, func(r Scanner) (store.Secret, error) {
		sec := store.Secret{Box: box, Name: name}
		var fields, rules string
		err := r.Scan(&sec.Host, &sec.Sealed, Time(&sec.UpdatedAt), &sec.Kind, &fields, &rules, &sec.Rate)
		sec.BodyFields, sec.Rules = store.SplitBodyFields(fields), store.SplitRules(rules)
		return sec, err
	}, args...)
}

// ListSecrets returns the secrets of box, by name, Sealed left nil.
func (s *Store) ListSecrets(ctx context.Context, box string) ([]store.Secret, error) {
	return collect(ctx, s, fmt.Sprintf("list secrets of box %q", box), "SELECT name, host, updated_at, kind, body_fields, rules, rate FROM secrets WHERE box = $1 ORDER BY name"+s.D.Collate(),
		func(r Scanner) (store.Secret, error) {
			sec := store.Secret{Box: box}
			var fields, rules string
			if err := r.Scan(&sec.Name, &sec.Host, Time(&sec.UpdatedAt), &sec.Kind, &fields, &rules, &sec.Rate); err != nil {
				return sec, err
			}
			sec.BodyFields, sec.Rules = store.SplitBodyFields(fields), store.SplitRules(rules)
			return sec, nil
		}, box)
}

// DeleteSecret removes the secret name of box; store.ErrNotFound if none.
func (s *Store) DeleteSecret(ctx context.Context, box, name string) error {
	return s.touch(ctx, fmt.Sprintf("delete secret %q of box %q", name, box), []store.Change{{Kind: store.ChangeSecret, Key: box + "/" + name}},
		"DELETE FROM secrets WHERE box = $1 AND name = $2", box, name)
}
