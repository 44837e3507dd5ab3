package feedback_test

import (
	"context"
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
)

// reenrolling is a store that, as the first batch is added, changes
// its box with change: the operator re-enrolling the box, or rotating its
// token, while its batch is in flight.
type reenrolling struct {
	store.Store
	change func(ctx context.Context, s store.Store, box string) error
	once   sync.Once
}

func (r *reenrolling) AddFeedback(ctx context.Context, f store.FeedbackBatch, tokenHash string, bound store.FeedbackBound) (store.FeedbackAdded, error) {
	var err error
	r.once.Do(func() { err = r.change(ctx, r.Store, f.Box) })
	if err != nil {
		return store.FeedbackAdded{}, err
	}
	return r.Store.AddFeedback(ctx, f, tokenHash, bound)
}

// reenrol removes box and adds a new one under its name with another
// token.
func reenrol(ctx context.Context, s store.Store, box string) error {
	if err := s.DeleteBox(ctx, box); err != nil {
		return err
	}
	return s.CreateBox(ctx, store.Box{Name: box, TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerShared})
}

// rotate replaces box's token at once, with no grace.
func rotate(ctx context.Context, s store.Store, box string) error {
	return s.RotateToken(ctx, box, "the box's new token hash")
}

// Unwrap lets the cache listen to the store's notifications.
func (r *reenrolling) Unwrap() store.Store { return r.Store }

// TestFeedback_BatchOfARemovedBoxIsNotTheNewOnes: a batch admitted with
// the token of a box removed before it is kept is refused as a batch of
// a removed box, and not kept as a batch of the box added under its name
// meanwhile, whose owner never consented.
func TestFeedback_BatchOfARemovedBoxIsNotTheNewOnes(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	br := brokertest.New(t, brokertest.Options{Store: &reenrolling{Store: st, change: reenrol}})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	setConsent(t, br, "alpha", true)
	resp := br.Do("POST", "/api/feedback", tok, []byte(`{"entries":[{"note":"from the removed box"}]}`), nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(resp.Body), "removed") {
		t.Errorf("batch of the removed box = %d %s, want 403 naming the box removed", resp.StatusCode, resp.Body)
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("the new alpha's feedback = %d batches (%s), want none of the removed box's", len(fb), fb[0].Body)
	}
}

// TestFeedback_BatchAfterARotationSaysTheTokenIsNoBoxs: a batch admitted
// with a box's token replaced (with no grace) before it is kept is
// refused as the broker refuses that token from then on, as no box's
// token: not as a batch of a removed box, which the box is not.
func TestFeedback_BatchAfterARotationSaysTheTokenIsNoBoxs(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	br := brokertest.New(t, brokertest.Options{Store: &reenrolling{Store: st, change: rotate}})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	setConsent(t, br, "alpha", true)
	resp := br.Do("POST", "/api/feedback", tok, []byte(`{"entries":[{"note":"with the replaced token"}]}`), nil)
	_, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != http.StatusForbidden || msg != capability.UnknownToken().Message {
		t.Errorf("batch with the replaced token = %d %s, want 403 %q", resp.StatusCode, resp.Body, capability.UnknownToken().Message)
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("alpha's feedback = %d batches (%s), want none sent with its replaced token", len(fb), fb[0].Body)
	}
}
