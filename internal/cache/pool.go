package cache

import (
	"context"

	"github.com/intentius/boxbroker/internal/store"
)

// PoolEntries returns the named entries of the operator's credential pool,
// by name, sealed. The slice is shared: callers must not modify it.
func (c *Cache) PoolEntries(ctx context.Context) ([]store.PoolEntry, error) {
	c.mu.RLock()
	ok, gen := c.fresh()
	if ok && c.pool != nil {
		es := c.pool
		c.mu.RUnlock()
		return es, nil
	}
	c.mu.RUnlock()
	es, err := c.st.PoolEntries(ctx)
	if err != nil {
		return nil, err
	}
	if es == nil {
		es = []store.PoolEntry{}
	}
	c.mu.Lock()
	if ok && c.gen == gen {
		c.pool = es
	}
	c.mu.Unlock()
	return es, nil
}
