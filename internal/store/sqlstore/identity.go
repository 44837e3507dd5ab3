package sqlstore

import "context"

// Identity returns the store's identity; see store.Store.
func (s *Store) Identity(ctx context.Context) (string, error) {
	var id string
	if err := s.R.QueryRowContext(ctx, "SELECT id FROM identity WHERE one = 1").Scan(&id); err != nil {
		return "", s.D.Translate("read the store's identity", err)
	}
	return id, nil
}
