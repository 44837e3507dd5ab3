package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// ProxyCA returns the HTTPS proxy's certificate authority, or
// store.ErrNotFound before one was made.
func (s *Store) ProxyCA(ctx context.Context) (store.ProxyCA, error) {
	var ca store.ProxyCA
	err := s.pool.QueryRow(ctx, "SELECT cert_pem, sealed_key, created_at FROM proxy_ca WHERE id = 1").Scan(&ca.CertPEM, &ca.SealedKey, &ca.CreatedAt)
	if err != nil {
		return store.ProxyCA{}, translate("proxy CA", err)
	}
	ca.CreatedAt = ca.CreatedAt.UTC()
	return ca, nil
}

// CreateProxyCA stores ca unless an authority is stored already, and
// returns the one stored: replicas racing at their first start end with
// the first one's. It is read by no cache, so no change is logged.
func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.write(ctx, "create proxy CA", func(tx pgx.Tx) ([]store.Change, error) {
		if _, err := tx.Exec(ctx, "INSERT INTO proxy_ca (id, cert_pem, sealed_key, created_at) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING",
			ca.CertPEM, ca.SealedKey, ca.CreatedAt); err != nil {
			return nil, err
		}
		err := tx.QueryRow(ctx, "SELECT cert_pem, sealed_key, created_at FROM proxy_ca WHERE id = 1").Scan(&kept.CertPEM, &kept.SealedKey, &kept.CreatedAt)
		kept.CreatedAt = kept.CreatedAt.UTC()
		return nil, err
	})
	return kept, err
}
