package payer_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/token"
)

// FuzzGrantHeader holds the chant-grant check to the protocol for any
// header values a box sends: the visitor pays exactly when the request
// carries one chant-grant value that is a live grant issued for this box
// to a visitor holding a credential; any other value — malformed, unknown,
// another box's, expired, revoked, credential-less, repeated, or two
// values — is ignored and the box's own payer pays. No grant value ever
// reaches the logs.
//
// In a fuzzed value, $L, $B, $E, $R and $N stand for the values of a
// live grant for box a, a live grant for box b, an expired and a revoked
// grant for a, and a live grant for a whose visitor holds no credential,
// so that the fuzzer reaches every branch.
func FuzzGrantHeader(f *testing.F) {
	fx := newFixture(f)
	ctx := context.Background()
	live, _ := fx.issue(f, "a", visitor, time.Hour)
	other, _ := fx.issue(f, "b", visitor, time.Hour)
	expired, _ := fx.issue(f, "a", visitor, time.Minute)
	revoked, rg := fx.issue(f, "a", visitor, time.Hour)
	bare, _ := fx.issue(f, "a", "github:nocred", time.Hour)
	if err := fx.Server.Store.RevokeGrant(ctx, rg.ID, fx.clock.Now()); err != nil {
		f.Fatal(err)
	}
	fx.clock.Advance(2 * time.Minute)
	box, err := fx.Server.Store.Box(ctx, "a")
	if err != nil {
		f.Fatal(err)
	}
	expand := strings.NewReplacer("$L", live, "$B", other, "$E", expired, "$R", revoked, "$N", bare)
	pay := fx.Server.Payer.Func(box, box.TokenHash)

	for _, s := range []struct {
		a, b string
		n    uint8
	}{
		{"$L", "", 1}, {"$B", "", 1}, {"$E", "", 1}, {"$R", "", 1}, {"$N", "", 1},
		{"$L", "$L", 2}, {"$L", "$B", 2}, {" $L", "", 1}, {"$L ", "", 1}, {"$Lx", "", 1},
		{"bbg_nope", "", 1}, {"", "", 1}, {"a b", "", 1}, {"é", "", 1}, {"$L", "", 0},
	} {
		f.Add(s.a, s.b, s.n)
	}
	f.Fuzz(func(t *testing.T, a, b string, n uint8) {
		var vals []string
		switch n % 3 {
		case 1:
			vals = []string{expand.Replace(a)}
		case 2:
			vals = []string{expand.Replace(a), expand.Replace(b)}
		}
		r, _ := http.NewRequest("POST", "http://broker"+messages, nil)
		if vals != nil {
			r.Header[protocol.HeaderGrant] = vals
		}
		before := len(fx.logs.String())
		paid, err := pay(ctx, r)
		if err != nil {
			t.Fatalf("Func(a)(grant %q) error %v", vals, err)
		}
		if len(vals) == 1 && vals[0] == live {
			if paid.Payer.Kind != protocol.PayerVisitor || paid.Payer.Principal == nil || *paid.Payer.Principal != visitor || string(paid.Credential) != visitorKey {
				t.Fatalf("Func(a)(the live grant) = %s, want the visitor paying with its credential", protocol.FormatPayerHeader(paid.Payer))
			}
		} else if paid.Payer.Kind != protocol.PayerShared || string(paid.Credential) != sharedKey {
			t.Fatalf("Func(a)(grant %q) = %s, want shared paying with the shared credential", vals, protocol.FormatPayerHeader(paid.Payer))
		}
		// No grant value, fuzzed or issued, is ever logged: the logs say
		// a grant's ID or a short hash, never anything beginning bbg_.
		if logs := fx.logs.String()[before:]; strings.Contains(logs, token.GrantPrefix) {
			t.Fatalf("Func(a)(grant %q) logged a grant's value: %s", vals, logs)
		}
	})
}
