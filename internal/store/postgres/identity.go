package postgres

import "context"

// Identity returns the store's identity; see store.Store.
func (s *Store) Identity(ctx context.Context) (string, error) {
	var id string
	if err := s.pool.QueryRow(ctx, "SELECT id FROM identity WHERE one = 1").Scan(&id); err != nil {
		return "", translate("read the store's identity", err)
	}
	return id, nil
}
