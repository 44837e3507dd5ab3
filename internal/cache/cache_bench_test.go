package cache_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// warm returns a cache over a SQLite store holding one box, its report
// and a credential, with every one read once; its clock never moves, so
// it stays fresh.
func warm(b *testing.B) *cache.Cache {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	now := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	if err := st.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h", CreatedAt: now, PayerKind: "shared"}); err != nil {
		b.Fatal(err)
	}
	if _, err := st.SaveDeclaration(ctx, "salad", "h", []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}],"at":"2026-10-01T12:00:00Z"}`), now); err != nil {
		b.Fatal(err)
	}
	if err := st.SetCredential(ctx, store.Credential{ID: "anthropic", Sealed: []byte("sealed"), UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	if err := st.SetSecret(ctx, store.Secret{Box: "salad", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed"), UpdatedAt: now}); err != nil {
		b.Fatal(err)
	}
	c := cache.New(st, cache.Options{Now: func() time.Time { return now }})
	if err := c.Poll(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := c.BoxByTokenHash(ctx, "h"); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Declaration(ctx, "salad", "h"); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Credential(ctx, "anthropic"); err != nil {
		b.Fatal(err)
	}
	return c
}

func BenchmarkBoxByTokenHash_Hit(b *testing.B) {
	c, ctx := warm(b), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.BoxByTokenHash(ctx, "h"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeclaration_Hit(b *testing.B) {
	c, ctx := warm(b), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Declaration(ctx, "salad", "h"); err != nil || d == nil {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkCredential_Hit(b *testing.B) {
	c, ctx := warm(b), context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Credential(ctx, "anthropic"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBoxByTokenHash_Store is the same read from the store itself:
// what every request would cost without the cache.
func BenchmarkBoxByTokenHash_Store(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateBox(ctx, store.Box{Name: "salad", TokenHash: "h", CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.BoxByTokenHash(ctx, "h"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSecretOfToken_Hit(b *testing.B) {
	c, ctx := warm(b), context.Background()
	if _, err := c.SecretOfToken(ctx, "salad", "h", "GITHUB"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.SecretOfToken(ctx, "salad", "h", "GITHUB"); err != nil {
			b.Fatal(err)
		}
	}
}
