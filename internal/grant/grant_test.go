package grant_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "grant.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateBox(context.Background(), store.Box{Name: "a", TokenHash: "h", CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestIssue_StoresOnlyTheHash(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	value, g, err := grant.Issue(ctx, st, "a", "github:vee", 0, now)
	if err != nil {
		t.Fatalf("Issue(a, github:vee) = %v", err)
	}
	if !strings.HasPrefix(value, token.GrantPrefix) || !protocol.IsGrantValue(value) || len(value) != len(token.GrantPrefix)+43 {
		t.Errorf("Issue value = %q, want %s and 43 base64url characters", value, token.GrantPrefix)
	}
	if !strings.HasPrefix(g.ID, grant.IDPrefix) || strings.Contains(value, g.ID[len(grant.IDPrefix):]) {
		t.Errorf("Issue ID = %q", g.ID)
	}
	if !g.ExpiresAt.Equal(now.Add(grant.DefaultTTL)) {
		t.Errorf("Issue ExpiresAt = %v, want %v", g.ExpiresAt, now.Add(grant.DefaultTTL))
	}
	stored, err := st.GrantByHash(ctx, token.Hash(value))
	if err != nil {
		t.Fatalf("GrantByHash(Hash(value)) = %v", err)
	}
	if stored.ID != g.ID || stored.Hash == value || stored.Principal != "github:vee" || stored.Box != "a" {
		t.Errorf("stored grant = %+v", stored)
	}
	list, err := st.ListGrants(ctx, "a")
	if err != nil || len(list) != 1 {
		t.Fatalf("ListGrants(a) = %v, %v", list, err)
	}
	// Two grants never share a value.
	other, _, err := grant.Issue(ctx, st, "a", "github:vee", time.Hour, now)
	if err != nil || other == value {
		t.Errorf("second Issue = %q, %v", other, err)
	}
}

func TestIssue_Refusals(t *testing.T) {
	st := openStore(t)
	now := time.Now()
	tests := []struct {
		name, box, principal string
		ttl                  time.Duration
		want                 error
	}{
		{"over the bound", "a", "github:vee", grant.MaxTTL + time.Second, grant.ErrTTL},
		{"negative", "a", "github:vee", -time.Minute, grant.ErrTTL},
		{"principal with a space", "a", "github:v ee", time.Minute, grant.ErrPrincipal},
		{"no principal", "a", "", time.Minute, grant.ErrPrincipal},
		{"no such box", "nobox", "github:vee", time.Minute, store.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _, err := grant.Issue(context.Background(), st, tt.box, tt.principal, tt.ttl, now)
			if !errors.Is(err, tt.want) || v != "" {
				t.Errorf("Issue(%q, %q, %v) = %q, %v, want %v", tt.box, tt.principal, tt.ttl, v, err, tt.want)
			}
		})
	}
	if _, _, err := grant.Issue(context.Background(), st, "a", "github:vee", grant.MaxTTL, now); err != nil {
		t.Errorf("Issue(MaxTTL) = %v, want nil", err)
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	base := store.Grant{ID: "grt_1", Box: "a", Principal: "github:vee", CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Minute)}
	with := func(f func(*store.Grant)) store.Grant {
		g := base
		f(&g)
		return g
	}
	tests := []struct {
		name string
		g    store.Grant
		box  string
		want string
	}{
		{"good", base, "a", grant.Accepted},
		{"another box", base, "b", grant.OtherBox},
		{"expires now", with(func(g *store.Grant) { g.ExpiresAt = now }), "a", grant.Expired},
		{"expired", with(func(g *store.Grant) { g.ExpiresAt = now.Add(-time.Second) }), "a", grant.Expired},
		{"never expires", with(func(g *store.Grant) { g.ExpiresAt = time.Time{} }), "a", grant.Accepted},
		{"revoked", with(func(g *store.Grant) { g.RevokedAt = now.Add(-time.Second) }), "a", grant.Revoked},
		{"revoked and expired", with(func(g *store.Grant) { g.RevokedAt, g.ExpiresAt = now, now }), "a", grant.Revoked},
		{"another box's, revoked", with(func(g *store.Grant) { g.RevokedAt = now }), "b", grant.OtherBox},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := grant.Check(tt.g, tt.box, now); got != tt.want {
				t.Errorf("Check(%s, %q) = %q, want %q", tt.name, tt.box, got, tt.want)
			}
		})
	}
}
