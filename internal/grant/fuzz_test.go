package grant_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// FuzzIssueAndCheck holds Issue and Check to their contract for any
// principal, lifetime, box and moment: Issue refuses a principal that is
// not one or a lifetime outside (0, MaxTTL] with its sentinel; otherwise
// the value is a grant value the store finds by its hash (and only by
// it), and Check accepts it exactly for its own box, before its expiry
// and while it is not revoked, saying why not otherwise.
func FuzzIssueAndCheck(f *testing.F) {
	st, err := sqlite.Open(filepath.Join(f.TempDir(), "grant.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, b := range []string{"a", "b"} {
		if err := st.CreateBox(ctx, store.Box{Name: b, TokenHash: "h" + b, CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
			f.Fatal(err)
		}
	}
	f.Add("github:vee", int64(900), int64(0), false, false, false)
	f.Add("github:vee", int64(0), int64(899), false, false, false)
	f.Add("github:vee", int64(900), int64(900), false, false, false)
	f.Add("github:vee", int64(86400), int64(-1), true, false, false)
	f.Add("github:vee", int64(86401), int64(0), false, false, false)
	f.Add("github:vee", int64(-5), int64(0), false, false, false)
	f.Add("a b", int64(60), int64(0), false, false, false)
	f.Add("", int64(60), int64(0), false, true, false)
	f.Add("github:vee", int64(60), int64(10), false, false, true)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, principal string, ttlSeconds, atSeconds int64, revoke, otherBox, wrongValue bool) {
		ttl := time.Duration(ttlSeconds) * time.Second
		if ttlSeconds > 1<<32 || ttlSeconds < -(1<<32) {
			ttl = time.Duration(ttlSeconds) // no overflow
		}
		value, g, err := grant.Issue(ctx, st, "a", principal, ttl, now)
		switch {
		case ttl < 0 || ttl > grant.MaxTTL:
			if !errors.Is(err, grant.ErrTTL) {
				t.Fatalf("Issue(ttl %v) = %v, want ErrTTL", ttl, err)
			}
			return
		case !protocol.IsPrincipal(principal):
			if !errors.Is(err, grant.ErrPrincipal) {
				t.Fatalf("Issue(principal %q) = %v, want ErrPrincipal", principal, err)
			}
			return
		case err != nil:
			t.Fatalf("Issue(%q, %v) = %v", principal, ttl, err)
		}
		if ttl == 0 {
			ttl = grant.DefaultTTL
		}
		if !protocol.IsGrantValue(value) || g.Hash != token.Hash(value) || g.Principal != principal || !g.ExpiresAt.Equal(now.Add(ttl)) {
			t.Fatalf("Issue(%q, %v) = %q %+v", principal, ttl, value, g)
		}
		if wrongValue {
			value += "x"
		}
		stored, err := st.GrantByHash(ctx, token.Hash(value))
		if wrongValue {
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("GrantByHash(Hash(another value)) = %+v, %v, want ErrNotFound", stored, err)
			}
			return
		}
		if err != nil || stored.ID != g.ID {
			t.Fatalf("GrantByHash(Hash(value)) = %+v, %v, want %s", stored, err, g.ID)
		}
		at := now.Add(time.Duration(atSeconds%(2*86400)) * time.Second)
		if revoke {
			if err := st.RevokeGrant(ctx, g.ID, now); err != nil {
				t.Fatal(err)
			}
			if stored, err = st.GrantByHash(ctx, token.Hash(value)); err != nil {
				t.Fatal(err)
			}
		}
		box := "a"
		if otherBox {
			box = "b"
		}
		got := grant.Check(stored, box, at)
		want := grant.Accepted
		switch {
		case otherBox:
			want = grant.OtherBox
		case revoke:
			want = grant.Revoked
		case !at.Before(now.Add(ttl)):
			want = grant.Expired
		}
		if got != want {
			t.Fatalf("Check(grant for a, %s, issued %v for %v, at %v, revoked %v) = %s, want %s", box, now, ttl, at, revoke, got, want)
		}
	})
}
