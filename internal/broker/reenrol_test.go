package broker_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
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
