package sqlstore

import "context"

// Identity returns the store's identity; see store.Store.
func (s *Store) Identity(ctx context.Context) (string, error) {
	return one(ctx, s, func() string { return "read the store's identity" }, "SELECT id FROM identity WHERE one = 1", value[string])
}
