package broker_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// reenrolling is a store that, as the first report of its box is saved,
// removes the box and adds a new one under its name with another token:
// the operator re-enrolling the box while its report is in flight.
type reenrolling struct {
	store.Store
	once sync.Once
}

func (r *reenrolling) SaveDeclaration(ctx context.Context, box, tokenHash string, doc []byte, at time.Time) (store.KeptDeclaration, error) {
	var err error
	r.once.Do(func() {
		if err = r.Store.DeleteBox(ctx, box); err != nil {
			return
		}
		err = r.Store.CreateBox(ctx, store.Box{Name: box, TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerShared})
	})
	if err != nil {
		return store.KeptDeclaration{}, err
	}
	return r.Store.SaveDeclaration(ctx, box, tokenHash, doc, at)
}

// Unwrap lets the cache listen to the store's notifications.
func (r *reenrolling) Unwrap() store.Store { return r.Store }

// TestDeclaration_ReportOfARemovedBoxIsNotTheNewOnes: a report admitted
// with the token of a box removed before it is saved is refused as a
// token that is no box's, and not kept as the report (listing included)
// of the box added under its name meanwhile.
func TestDeclaration_ReportOfARemovedBoxIsNotTheNewOnes(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokertest.Options{Store: &reenrolling{Store: st}})
	tok := b.AddBox("a")
	resp := b.Do("POST", protocol.RouteDeclaration, tok, []byte(`{"capabilities":[],"listing":{"title":"Old Shop","line":"from the removed box"}}`), nil)
	if resp.StatusCode != 401 {
		t.Errorf("report of the removed box = %d %s, want 401", resp.StatusCode, resp.Body)
	}
	if doc, _, err := st.Declaration(context.Background(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Declaration(a) of the new box = %s, %v, want none", doc, err)
	}
}

// TestDeclaration_ReportSavedAsTheGraceEndsIsRefusedAsPastIt: a report
// admitted with a box's token before its rotation while the grace lasts
// by the broker's clock, but saved once it has ended by the database's,
// is refused as a token past its grace is at admission, and not kept.
func TestDeclaration_ReportSavedAsTheGraceEndsIsRefusedAsPastIt(t *testing.T) {
	var behind atomic.Int64
	behind.Store(int64(time.Hour))
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) {
		o.TokenNow = func() time.Time { return time.Now().Add(-time.Duration(behind.Load())) }
	}})
	old := b.AddBox("a")
	next, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	// The grace ended a minute ago by the database's clock (the
	// machine's), and ends in 59 minutes by the broker's.
	if err := b.Server.Store.ReplaceToken(context.Background(), "a", store.Rotation{Hash: token.Hash(next), GraceUntil: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	report := []byte(`{"capabilities":[],"listing":{"title":"Late","line":"saved past the grace"}}`)
	saved := b.Do("POST", protocol.RouteDeclaration, old, report, nil)
	if doc, _, err := b.Server.Store.Declaration(context.Background(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Declaration(a) after a report saved past the grace = %s, %v, want none", doc, err)
	}
	behind.Store(0)
	admitted := b.Do("POST", protocol.RouteDeclaration, old, report, nil)
	if admitted.StatusCode != http.StatusForbidden {
		t.Fatalf("report admitted past the grace = %d %s, want 403", admitted.StatusCode, admitted.Body)
	}
	if saved.StatusCode != admitted.StatusCode || !bytes.Equal(saved.Body, admitted.Body) {
		t.Errorf("report saved past the grace = %d %s, want %d %s as one admitted past it", saved.StatusCode, saved.Body, admitted.StatusCode, admitted.Body)
	}
}

// TestDeclaration_ReportSavedAsTheTokenExpiresIsRefusedAsPastIt: a report
// admitted with a box's token before its expiry by the broker's clock,
// but saved once it has expired by the database's, is refused as a token
// past its expiry is at admission, and not kept.
func TestDeclaration_ReportSavedAsTheTokenExpiresIsRefusedAsPastIt(t *testing.T) {
	var behind atomic.Int64
	behind.Store(int64(time.Hour))
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) {
		o.TokenNow = func() time.Time { return time.Now().Add(-time.Duration(behind.Load())) }
	}})
	b.AddBox("a")
	tok, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	// The token expired a minute ago by the database's clock (the
	// machine's), and expires in 59 minutes by the broker's.
	if err := b.Server.Store.ReplaceToken(context.Background(), "a", store.Rotation{Hash: token.Hash(tok), TTL: time.Hour, ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	report := []byte(`{"capabilities":[],"listing":{"title":"Late","line":"saved past the token's expiry"}}`)
	saved := b.Do("POST", protocol.RouteDeclaration, tok, report, nil)
	if doc, _, err := b.Server.Store.Declaration(context.Background(), "a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Declaration(a) after a report saved past its token's expiry = %s, %v, want none", doc, err)
	}
	behind.Store(0)
	admitted := b.Do("POST", protocol.RouteDeclaration, tok, report, nil)
	if admitted.StatusCode != http.StatusForbidden {
		t.Fatalf("report admitted past its token's expiry = %d %s, want 403", admitted.StatusCode, admitted.Body)
	}
	if saved.StatusCode != admitted.StatusCode || !bytes.Equal(saved.Body, admitted.Body) {
		t.Errorf("report saved past its token's expiry = %d %s, want %d %s as one admitted past it", saved.StatusCode, saved.Body, admitted.StatusCode, admitted.Body)
	}
}

// TestAdmit_ReportIsJudgedForTheTokenItWasReadFor: a box is removed and
// another added under its name (by another process, which the broker's
// memory has not heard of) while memory holds a report: the new box,
// which never reported, is not judged by the removed box's report it
// finds there, and the removed box's token, still admitted from memory,
// is not judged by the report the new box makes: it is refused as a
// removed box's.
func TestAdmit_ReportIsJudgedForTheTokenItWasReadFor(t *testing.T) {
	u := brokertest.NewUnheard(t)
	b := brokertest.New(t, brokertest.Options{Store: u})
	ctx := context.Background()
	b.SetCredential("anthropic", "sk-ant-api03-x")
	old := b.AddBox("alpha")
	b.Report(old, brokertest.Entry("inference", "agent"))
	b.Sync()
	if resp := b.Do("GET", "/llm/anthropic/v1/models", old, nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the box's call = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	// Removed and added anew by another process, which the broker's
	// memory, holding the box and its report, has not heard of.
	u.Deaf.Store(true)
	if err := u.Store.DeleteBox(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	tok, err := token.NewBox()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Store.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: token.Hash(tok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}

	resp := b.Do("GET", "/llm/anthropic/v1/models", tok, nil, nil)
	if typ, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || typ != protocol.TypePermission || !strings.Contains(msg, "declar") {
		t.Errorf("the new box's call, never reported = %d %s, want 403 as undeclared", resp.StatusCode, resp.Body)
	}
	b.Report(tok, brokertest.Entry("inference", "agent"))
	resp = b.Do("GET", "/llm/anthropic/v1/models", old, nil, nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg != "The box was removed from this broker." {
		t.Errorf("the removed box's call, the new box reported = %d %s, want 403 removed", resp.StatusCode, resp.Body)
	}
	if n := len(b.Upstream.Seen()); n != 1 {
		t.Errorf("the upstream received %d calls, want the removed box's first alone", n)
	}
}
