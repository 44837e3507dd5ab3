package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

const selectProxyCA = "SELECT cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from FROM proxy_ca WHERE id = 1"

// ProxyCA returns the HTTPS proxy's certificate authority, or
// store.ErrNotFound before one was made.
func (s *Store) ProxyCA(ctx context.Context) (store.ProxyCA, error) {
	ca, err := scanProxyCA(s.pool.QueryRow(ctx, selectProxyCA))
	if err != nil {
		return store.ProxyCA{}, translate("proxy CA", err)
	}
	return ca, nil
}

func scanProxyCA(row pgx.Row) (store.ProxyCA, error) {
	var ca store.ProxyCA
	var from *time.Time
	if err := row.Scan(&ca.CertPEM, &ca.SealedKey, &ca.CreatedAt, &ca.NextCertPEM, &ca.NextSealedKey, &from); err != nil {
		return store.ProxyCA{}, err
	}
	ca.CreatedAt = ca.CreatedAt.UTC()
	ca.NextFrom = fromNullTime(from)
	return ca, nil
}

// CreateProxyCA stores ca unless an authority is stored already, and
// returns the one stored: replicas racing at their first start end with
// the first one's. It is read by no cache, so no change is logged.
func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "create proxy CA", func(tx pgx.Tx) ([]store.Change, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO proxy_ca (id, cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from) VALUES (1, $1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
			ca.CertPEM, ca.SealedKey, ca.CreatedAt, nullBytes(ca.NextCertPEM), nullBytes(ca.NextSealedKey), nullTime(ca.NextFrom)); err != nil {
			return nil, err
		}
		var err error
		kept, err = scanProxyCA(tx.QueryRow(ctx, selectProxyCA))
		return nil, err
	})
	return kept, err
}

// ReplaceProxyCA stores ca in place of the stored authority when that is
// still was, and returns the one stored after. It is read by no cache,
// so no change is logged.
func (s *Store) ReplaceProxyCA(ctx context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "replace proxy CA", func(tx pgx.Tx) ([]store.Change, error) {
		if _, err := tx.Exec(ctx, `UPDATE proxy_ca SET cert_pem = $1, sealed_key = $2, created_at = $3, next_cert_pem = $4, next_sealed_key = $5, next_from = $6
			WHERE id = 1 AND cert_pem = $7 AND next_cert_pem IS NOT DISTINCT FROM $8`,
			ca.CertPEM, ca.SealedKey, ca.CreatedAt, nullBytes(ca.NextCertPEM), nullBytes(ca.NextSealedKey), nullTime(ca.NextFrom),
			was.CertPEM, nullBytes(was.NextCertPEM)); err != nil {
			return nil, err
		}
		var err error
		kept, err = scanProxyCA(tx.QueryRow(ctx, selectProxyCA))
		return nil, err
	})
	return kept, err
}

// nullBytes is b for an optional bytea: NULL when b is empty.
func nullBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
