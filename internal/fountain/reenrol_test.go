package fountain_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
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
