package operator_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// recorder is a Cache that records what it was told.
type recorder struct{ dropped []string }

func (r *recorder) Drop(kind, key string)            { r.dropped = append(r.dropped, kind+" "+key) }
func (r *recorder) Settle(ctx context.Context) error { return nil }

func newService(t *testing.T) (*operator.Service, store.Store, *recorder) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &recorder{}
	svc, err := operator.New(operator.Config{Store: st, Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Via(operator.Origin{Method: "TEST", Route: "test"}), st, c
}

// TestService_RemoveBoxTakesTheOwnersCredential: the owner's credential
// is the box's alone and goes with it, dropped from the cache, whichever
// front end removed the box.
func TestService_RemoveBoxTakesTheOwnersCredential(t *testing.T) {
	svc, st, c := newService(t)
	ctx := context.Background()
	if _, err := svc.AddBox(ctx, operator.NewBox{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetCredential(ctx, store.Credential{ID: payer.OwnerAnthropic("alpha"), Sealed: []byte("sealed"), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := svc.RemoveBox(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Credential(ctx, payer.OwnerAnthropic("alpha")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the owner's credential after RemoveBox: %v, want ErrNotFound", err)
	}
	want := store.ChangeCredential + " " + payer.OwnerAnthropic("alpha")
	found := false
	for _, d := range c.dropped {
		found = found || d == want
	}
	if !found {
		t.Errorf("cache drops = %q, want %q among them", c.dropped, want)
	}
}

// TestService_Refusals: each malformed or missing name is refused with
// its code, and nothing is audited for it.
func TestService_Refusals(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.AddBox(ctx, operator.NewBox{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	paused := true
	tests := []struct {
		name string
		do   func() error
		want operator.Code
	}{
		{"add a bad name", func() error { _, err := svc.AddBox(ctx, operator.NewBox{Name: "Bad_Name"}); return err }, operator.Invalid},
		{"add again", func() error { _, err := svc.AddBox(ctx, operator.NewBox{Name: "alpha"}); return err }, operator.Conflict},
		{"add a bad ttl", func() error { _, err := svc.AddBox(ctx, operator.NewBox{Name: "beta", TTL: "soon"}); return err }, operator.Invalid},
		{"rotate none", func() error { _, err := svc.RotateBoxWith(ctx, "nobox", operator.TokenRotation{}); return err }, operator.NotFound},
		{"pause none", func() error { _, err := svc.UpdateBox(ctx, "nobox", operator.BoxSettings{Paused: &paused}); return err }, operator.NotFound},
		{"bind a bad CIDR", func() error {
			from := []string{"10.0.0.0/99"}
			_, err := svc.UpdateBox(ctx, "alpha", operator.BoxSettings{From: &from})
			return err
		}, operator.Invalid},
		{"remove none", func() error { return svc.RemoveBox(ctx, "nobox") }, operator.NotFound},
		{"revoke a bad id", func() error { return svc.RevokeGrant(ctx, "a b") }, operator.Invalid},
		{"assign a bad kind", func() error {
			_, err := svc.AddResource(ctx, "alpha", operator.NewResource{Kind: "disk", ID: "d"})
			return err
		}, operator.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var oe *operator.Error
			if err := tt.do(); !errors.As(err, &oe) || oe.Code != tt.want {
				t.Errorf("%s = %v, want code %d", tt.name, err, tt.want)
			}
		})
	}
	entries, err := st.ListAudit(ctx, store.AuditQuery{Limit: 100})
	if err != nil || len(entries) != 1 || entries[0].Message != "enrolled the box" || entries[0].Method != "TEST" {
		t.Errorf("audit = %+v, %v, want only alpha's enrolment", entries, err)
	}
}
