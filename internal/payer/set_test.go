package payer_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// meanwhile is a store whose next read of a box runs then first, after
// the read: another operator's change landing between an action's read
// of the box and its write.
type meanwhile struct {
	store.Store
	then func()
}

func (m *meanwhile) Box(ctx context.Context, name string) (store.Box, error) {
	b, err := m.Store.Box(ctx, name)
	if f := m.then; f != nil {
		m.then = nil
		f()
	}
	return b, err
}

// TestSet_PauseMadeMeanwhileStands: a box is paused (its operator
// stopping it) while its payer is being set; the payer's write does not
// undo the pause, and a pause written while the payer was being set is
// not undone by the pause's own write either: each action writes only
// what it changes.
func TestSet_PauseMadeMeanwhileStands(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	k, _, err := secrets.Load(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := sq.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: strings.Repeat("a", 64), CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
		t.Fatal(err)
	}
	on := true
	st := &meanwhile{Store: sq, then: func() {
		if err := sq.ChangeBox(ctx, "alpha", store.BoxChange{Paused: &on}); err != nil {
			t.Fatal(err)
		}
	}}
	ch, err := payer.Set(ctx, st, k, "alpha", payer.Choice{Kind: protocol.PayerOwner, Principal: "github:own", Credential: []byte("sk-ant-api03-OWNER-0123456789")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, err := sq.Box(ctx, "alpha")
	if err != nil || !b.Paused || b.PayerKind != protocol.PayerOwner || !ch.Box.Paused {
		t.Errorf("box after a pause made while its payer was set = %+v (answered %+v), %v; want paused and owner-paid", b, ch.Box, err)
	}

	// The other way: the payer set back to shared while the box is
	// resumed through the operator service.
	svc, err := operator.New(operator.Config{Store: &meanwhile{Store: sq, then: func() {
		if _, err := payer.Set(ctx, sq, k, "alpha", payer.Choice{Kind: protocol.PayerShared}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}}, Keyring: k})
	if err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := svc.UpdateBox(ctx, "alpha", operator.BoxSettings{Paused: &off}); err != nil {
		t.Fatal(err)
	}
	if b, err := sq.Box(ctx, "alpha"); err != nil || b.Paused || b.PayerKind != protocol.PayerShared {
		t.Errorf("box after a payer set while it was resumed = %+v, %v; want resumed and shared-paid", b, err)
	}
}
