package sqlite

import (
	"context"
	"database/sql"

	"github.com/intentius/boxbroker/internal/store"
)

// ProxyCA returns the HTTPS proxy's certificate authority, or
// store.ErrNotFound before one was made.
func (s *Store) ProxyCA(ctx context.Context) (store.ProxyCA, error) {
	return readProxyCA(ctx, s.r)
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func readProxyCA(ctx context.Context, q queryRower) (store.ProxyCA, error) {
	var ca store.ProxyCA
	var at int64
	var from sql.NullInt64
	err := q.QueryRowContext(ctx, "SELECT cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from FROM proxy_ca WHERE id = 1").
		Scan(&ca.CertPEM, &ca.SealedKey, &at, &ca.NextCertPEM, &ca.NextSealedKey, &from)
	if err != nil {
		return store.ProxyCA{}, translate("proxy CA", err)
	}
	ca.CreatedAt = fromMicros(at)
	ca.NextFrom = fromNullMicros(from)
	return ca, nil
}

// CreateProxyCA stores ca unless an authority is stored already, and
// returns the one stored. It is read by no cache, so no change is logged.
func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "create proxy CA", func(tx *sql.Tx) ([]store.Change, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO proxy_ca (id, cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from) VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
			ca.CertPEM, ca.SealedKey, micros(ca.CreatedAt), nullBlob(ca.NextCertPEM), nullBlob(ca.NextSealedKey), nullMicros(ca.NextFrom)); err != nil {
			return nil, err
		}
		var err error
		kept, err = readProxyCA(ctx, tx)
		return nil, err
	})
	return kept, err
}

// ReplaceProxyCA stores ca in place of the stored authority when that is
// still was, and returns the one stored after. It is read by no cache,
// so no change is logged.
func (s *Store) ReplaceProxyCA(ctx context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "replace proxy CA", func(tx *sql.Tx) ([]store.Change, error) {
		if _, err := tx.ExecContext(ctx, `UPDATE proxy_ca SET cert_pem = ?, sealed_key = ?, created_at = ?, next_cert_pem = ?, next_sealed_key = ?, next_from = ?
			WHERE id = 1 AND cert_pem = ? AND next_cert_pem IS ?`,
			ca.CertPEM, ca.SealedKey, micros(ca.CreatedAt), nullBlob(ca.NextCertPEM), nullBlob(ca.NextSealedKey), nullMicros(ca.NextFrom),
			was.CertPEM, nullBlob(was.NextCertPEM)); err != nil {
			return nil, err
		}
		var err error
		kept, err = readProxyCA(ctx, tx)
		return nil, err
	})
	return kept, err
}

// nullBlob stores an optional BLOB: NULL when b is empty.
func nullBlob(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
