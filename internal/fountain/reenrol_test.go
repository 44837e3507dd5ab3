package fountain_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/token"
)

// reenrolling is a store that, as the first conversation a box started
// is recorded, changes the box with change: the operator re-enrolling
// the box, or rotating its token, while its call is in flight.
type reenrolling struct {
	store.Store
	change func(ctx context.Context, s store.Store, box string) error
	once   sync.Once
}

func (r *reenrolling) AddBoxResource(ctx context.Context, res store.Resource, tokenHash string) error {
	var err error
	r.once.Do(func() { err = r.change(ctx, r.Store, res.Box) })
	if err != nil {
		return err
	}
	return r.Store.AddBoxResource(ctx, res, tokenHash)
}

// Unwrap lets the cache listen to the store's notifications.
func (r *reenrolling) Unwrap() store.Store { return r.Store }

// TestFountain_ConversationOfARemovedBoxIsNotTheNewOnes: a conversation
// started by a box removed (and another added under its name) before it
// is recorded is not recorded as the new box's, whose own calls would
// then reach it, and its answer is refused as one of a removed box; one
// started with a token replaced (with no grace) is refused as no box's
// token, and recorded as no one's.
func TestFountain_ConversationOfARemovedBoxIsNotTheNewOnes(t *testing.T) {
	tests := []struct {
		name   string
		change func(ctx context.Context, s store.Store, box string) error
		want   string
	}{
		{"removed and added anew", func(ctx context.Context, s store.Store, box string) error {
			if err := s.DeleteBox(ctx, box); err != nil {
				return err
			}
			return s.CreateBox(ctx, store.Box{Name: box, TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerShared})
		}, "The box was removed from this broker."},
		{"token replaced with no grace", func(ctx context.Context, s store.Store, box string) error {
			return s.RotateToken(ctx, box, "the box's new token hash")
		}, capability.UnknownToken().Message},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
			if err != nil {
				t.Fatal(err)
			}
			br := newBroker(t, brokertest.Options{Store: &reenrolling{Store: st, change: tt.change}})
			tok := br.AddBox("alpha")
			br.Report(tok, brokertest.Entry("fountain", "agent", "conversations"))
			resp := br.Do("POST", "/fountain/api/conversations", tok, []byte(`{"agent":"helper"}`), nil)
			if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg != tt.want {
				t.Errorf("POST /fountain/api/conversations = %d %s, want 403 %q", resp.StatusCode, resp.Body, tt.want)
			}
			if n := len(br.Fountain.Seen()); n != 1 {
				t.Fatalf("Fountain received %d requests, want the one start", n)
			}
			recs, err := st.ListResources(context.Background(), "alpha")
			if err != nil || len(recs) != 0 {
				t.Errorf("alpha's resources = %+v, %v; want none of the conversation started before", recs, err)
			}
		})
	}
}

// TestFountain_RemovedBoxFindsNoneOfTheNewBoxsIds: a box removed, and a
// new one added under its name and assigned a sandbox, while the
// broker's memory still admits the removed box's token: the removed
// box's request naming the sandbox is refused as a removed box's (not
// as one naming an id of no box's), nothing reaching Fountain, and so
// is its listing, which keeps none of the new box's ids.
func TestFountain_RemovedBoxFindsNoneOfTheNewBoxsIds(t *testing.T) {
	u := brokertest.NewUnheard(t)
	st := u.Store
	br := newBroker(t, brokertest.Options{Store: u, FountainHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/api/sandboxes" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"data":[{"id":"sb-new"}]}`)
			return
		}
		brokertest.FountainStandIn(w, r)
	})})
	old := br.AddBox("alpha")
	br.Report(old, brokertest.Entry("fountain", every...))
	// The broker's memory holds the box and its report, as after any
	// request of it, and has heard of every change so far.
	ctx := context.Background()
	br.Sync()
	if _, err := br.Server.Cache.BoxByTokenHash(ctx, token.Hash(old)); err != nil {
		t.Fatal(err)
	}
	if _, err := br.Server.Cache.Declaration(ctx, "alpha", token.Hash(old)); err != nil {
		t.Fatal(err)
	}
	// Removed and added anew by another process, and assigned a
	// sandbox, which the broker's memory has not heard of.
	u.Deaf.Store(true)
	if err := st.DeleteBox(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
	assign(t, br, "alpha", store.ResourceSandbox, "sb-new")

	for _, req := range []struct{ method, path, body string }{
		{"GET", "/fountain/api/sandboxes/sb-new", ""},
		{"GET", "/fountain/api/sandboxes?sandbox_id=sb-new", ""},
		{"POST", "/fountain/api/conversations", `{"agent":"helper","sandbox_id":"sb-new"}`},
	} {
		var body []byte
		if req.body != "" {
			body = []byte(req.body)
		}
		resp := br.Do(req.method, req.path, old, body, http.Header{"Content-Type": {"application/json"}})
		if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg != "The box was removed from this broker." {
			t.Errorf("%s %s of the removed box = %d %s, want 403 removed", req.method, req.path, resp.StatusCode, resp.Body)
		}
	}
	if n := len(br.Fountain.Seen()); n != 0 {
		t.Errorf("Fountain received %d requests naming the new box's sandbox, want none", n)
	}
	// Its listing is refused as every other request of it is, not
	// answered as an empty list (nor with the new box's ids).
	resp := br.Do("GET", "/fountain/api/sandboxes", old, nil, nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != http.StatusForbidden || msg != "The box was removed from this broker." || strings.Contains(string(resp.Body), "sb-new") {
		t.Errorf("the removed box's listing = %d %s, want 403 removed", resp.StatusCode, resp.Body)
	}
}
