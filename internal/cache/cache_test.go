package cache_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestCache_SecretFollowsTheChangeLog checks that a cached secret, and a
// cached absence, are dropped when another writer changes the secret or
// removes its box.
func TestCache_SecretFollowsTheChangeLog(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	clock := func() time.Time { return now }
	c := cache.New(st, cache.Options{Now: clock, MaxStale: time.Hour})
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "shop", TokenHash: "h1", CreatedAt: now, PayerKind: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Secret(ctx, "shop", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret(unset) error = %v, want ErrNotFound", err)
	}
	set := func(host string) {
		t.Helper()
		if err := st.SetSecret(ctx, store.Secret{Box: "shop", Name: "STRIPE", Host: host, Sealed: []byte{1}, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	set("https://a.example")
	// The absence is cached until the change log is read.
	if _, err := c.Secret(ctx, "shop", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret before poll error = %v, want the cached ErrNotFound", err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.Secret(ctx, "shop", "STRIPE")
	if err != nil || s.Host != "https://a.example" {
		t.Fatalf("Secret after set = %+v, %v, want host https://a.example", s, err)
	}
	set("https://b.example")
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Secret(ctx, "shop", "STRIPE"); err != nil || s.Host != "https://b.example" {
		t.Fatalf("Secret after change = %+v, %v, want host https://b.example", s, err)
	}
	if err := st.DeleteBox(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := c.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Secret(ctx, "shop", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Secret after box removed error = %v, want ErrNotFound", err)
	}
}
