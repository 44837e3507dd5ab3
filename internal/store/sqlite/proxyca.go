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
	err := q.QueryRowContext(ctx, "SELECT cert_pem, sealed_key, created_at FROM proxy_ca WHERE id = 1").Scan(&ca.CertPEM, &ca.SealedKey, &at)
	if err != nil {
		return store.ProxyCA{}, translate("proxy CA", err)
	}
	ca.CreatedAt = fromMicros(at)
	return ca, nil
}

// CreateProxyCA stores ca unless an authority is stored already, and
// returns the one stored. It is read by no cache, so no change is logged.
func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "create proxy CA", func(tx *sql.Tx) ([]store.Change, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO proxy_ca (id, cert_pem, sealed_key, created_at) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
			ca.CertPEM, ca.SealedKey, micros(ca.CreatedAt)); err != nil {
			return nil, err
		}
		var err error
		kept, err = readProxyCA(ctx, tx)
		return nil, err
	})
	return kept, err
}
