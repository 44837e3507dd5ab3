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
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// reenrolling is a store that, as the first batch is added, removes its
// box and adds a new one under its name with another token: the operator
// re-enrolling the box while its batch is in flight.
type reenrolling struct {
	store.Store
	once sync.Once
}

func (r *reenrolling) AddFeedback(ctx context.Context, f store.FeedbackBatch, tokenHash string, bound store.FeedbackBound) (store.FeedbackAdded, error) {
	var err error
	r.once.Do(func() {
		if err = r.Store.DeleteBox(ctx, f.Box); err != nil {
			return
		}
		err = r.Store.CreateBox(ctx, store.Box{Name: f.Box, TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerShared})
	})
	if err != nil {
		return store.FeedbackAdded{}, err
	}
	return r.Store.AddFeedback(ctx, f, tokenHash, bound)
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
	br := brokertest.New(t, brokertest.Options{Store: &reenrolling{Store: st}})
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
