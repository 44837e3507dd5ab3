package sqlstore

import (
	"context"
	"database/sql"

	"github.com/intentius/boxbroker/internal/store"
)

// ProxyCA returns the HTTPS proxy's certificate authority, or
// store.ErrNotFound before one was made.
func (s *Store) ProxyCA(ctx context.Context) (store.ProxyCA, error) {
	return s.readProxyCA(ctx, s.R)
}

func (s *Store) readProxyCA(ctx context.Context, q Querier) (store.ProxyCA, error) {
	var ca store.ProxyCA
	err := q.QueryRowContext(ctx, "SELECT cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from FROM proxy_ca WHERE id = 1").
		Scan(&ca.CertPEM, &ca.SealedKey, Time(&ca.CreatedAt), &ca.NextCertPEM, &ca.NextSealedKey, Time(&ca.NextFrom))
	if err != nil {
		return store.ProxyCA{}, s.D.Translate("proxy CA", err)
	}
	return ca, nil
}

// CreateProxyCA stores ca unless an authority is stored already, and
// returns the one stored: replicas racing at their first start end with
// the first one's. It is read by no cache, so no change is logged.
func (s *Store) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	return s.writeProxyCA(ctx, "create proxy CA", `INSERT INTO proxy_ca (id, cert_pem, sealed_key, created_at, next_cert_pem, next_sealed_key, next_from)
			VALUES (1, $1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
		ca.CertPEM, ca.SealedKey, s.D.Time(ca.CreatedAt), NullBlob(ca.NextCertPEM), NullBlob(ca.NextSealedKey), s.NullTime(ca.NextFrom))
}

// ReplaceProxyCA stores ca in place of the stored authority when that is
// still was, and returns the one stored after. It is read by no cache,
// so no change is logged.
func (s *Store) ReplaceProxyCA(ctx context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	return s.writeProxyCA(ctx, "replace proxy CA", `UPDATE proxy_ca SET cert_pem = $1, sealed_key = $2, created_at = $3, next_cert_pem = $4, next_sealed_key = $5, next_from = $6
			WHERE id = 1 AND cert_pem = $7 AND next_cert_pem IS NOT DISTINCT FROM $8`,
		ca.CertPEM, ca.SealedKey, s.D.Time(ca.CreatedAt), NullBlob(ca.NextCertPEM), NullBlob(ca.NextSealedKey), s.NullTime(ca.NextFrom),
		was.CertPEM, NullBlob(was.NextCertPEM))
}

// writeProxyCA runs query, one statement, in a write of its own that
// then reads the authority stored, and returns that.
func (s *Store) writeProxyCA(ctx context.Context, op, query string, args ...any) (store.ProxyCA, error) {
	var kept store.ProxyCA
	err := s.Write(ctx, op, func(tx *sql.Tx) ([]store.Change, error) {
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return nil, err
		}
		var err error
		kept, err = s.readProxyCA(ctx, tx)
		return nil, err
	})
	return kept, err
}
