package operator_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// raced is a store whose CA another process replaces as each rotation
// runs.
type raced struct{ store.Store }

func (r raced) ReplaceProxyCA(ctx context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	was.NextCertPEM = []byte("another process's")
	return was, nil
}

// caService is a Service with a keyring over a fresh store, whose clock
// reads now.
func caService(t *testing.T, now time.Time, wrap func(store.Store, *secrets.Keyring) store.Store) (*operator.Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	key := make([]byte, 32)
	rand.Read(key)
	kr, err := secrets.New(key)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := operator.New(operator.Config{Store: wrap(st, kr), Keyring: kr, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Via(operator.Origin{Method: "TEST", Route: "proxy ca rotate"}), st
}

// TestService_RotateProxyCA: a rotation is audited with the moment the
// new CA signs from, ProxyCA hands out both CAs until then, and a grace
// below zero or a rotation another process overtook rotates nothing and
// writes no row (the one row is the first ProxyCA's, which made the CA).
func TestService_RotateProxyCA(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	svc, st := caService(t, now, func(s store.Store, _ *secrets.Keyring) store.Store { return s })
	v, err := svc.ProxyCA(ctx)
	if err != nil || strings.Count(v.Certificates, "BEGIN CERTIFICATE") != 1 || v.NextFrom != nil {
		t.Fatalf("ProxyCA() = %d certificates, next from %v, %v; want one and none pending", strings.Count(v.Certificates, "BEGIN CERTIFICATE"), v.NextFrom, err)
	}
	if _, err := svc.RotateProxyCA(ctx, -time.Second); operator.CodeOf(err) != operator.Invalid {
		t.Errorf("RotateProxyCA(-1s) = %v, want Invalid", err)
	}
	r, err := svc.RotateProxyCA(ctx, 48*time.Hour)
	if err != nil || r.From != "2026-12-08T12:00:00.000Z" || !strings.HasPrefix(r.Certificate, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("RotateProxyCA(48h) = from %q, %v; want a new CA from 2026-12-08T12:00:00.000Z", r.From, err)
	}
	es, err := st.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil || len(es) != 2 || es[1].Message != "made the egress proxy's CA" {
		t.Fatalf("audit after making the CA, one rotation and one refusal = %+v, %v; want the CA's making and the rotation", es, err)
	}
	if e := es[0]; e.Box != "" || e.Route != "proxy ca rotate" || e.Capability != store.ActorAdmin || e.Message != "rotated the egress proxy's CA; the new one signs from 2026-12-08T12:00:00.000Z" {
		t.Errorf("the rotation's audit row = %+v", e)
	}
	v, err = svc.ProxyCA(ctx)
	if err != nil || strings.Count(v.Certificates, "BEGIN CERTIFICATE") != 2 || !strings.HasSuffix(v.Certificates, r.Certificate) || v.NextFrom == nil || *v.NextFrom != r.From {
		t.Errorf("ProxyCA() during the grace = %q next from %v, %v; want the current and the new from %s", v.Certificates, v.NextFrom, err, r.From)
	}

	overtaken, st2 := caService(t, now, func(s store.Store, _ *secrets.Keyring) store.Store { return raced{s} })
	if _, err := overtaken.ProxyCA(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := overtaken.RotateProxyCA(ctx, 0); operator.CodeOf(err) != operator.Conflict || !strings.Contains(err.Error(), "run it again") {
		t.Errorf("an overtaken rotation = %v, want Conflict saying to run it again", err)
	}
	if es, err := st2.ListAudit(ctx, store.AuditQuery{Limit: 10}); err != nil || len(es) != 1 || es[0].Message != "made the egress proxy's CA" {
		t.Errorf("an overtaken rotation wrote audit rows %+v, %v; want only the CA's making", es, err)
	}
}

// TestService_ProxyCANeedsAKeyring: with no keyring the CA's actions
// fail, and make nothing.
func TestService_ProxyCANeedsAKeyring(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.ProxyCA(ctx); err == nil {
		t.Errorf("ProxyCA() with no keyring succeeded")
	}
	if _, err := svc.RotateProxyCA(ctx, 0); err == nil {
		t.Errorf("RotateProxyCA(0) with no keyring succeeded")
	}
	if _, err := st.ProxyCA(ctx); err == nil {
		t.Errorf("the store holds a CA made with no keyring")
	}
}

// rival is a store in which another replica's CA, made under the same
// keyring, is stored just before this one's.
type rival struct {
	store.Store
	keyring *secrets.Keyring
}

func (r rival) CreateProxyCA(ctx context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	if _, err := proxyca.Load(ctx, r.Store, r.keyring, nil); err != nil {
		return store.ProxyCA{}, err
	}
	return r.Store.CreateProxyCA(ctx, ca)
}

// TestService_MakingTheProxyCAIsAudited: the ProxyCA that makes the CA
// writes one audit row, a ProxyCA of a CA already made writes none, nor
// does one whose CA a racing replica stored first; StoredProxyCA never
// makes a CA and writes no row.
func TestService_MakingTheProxyCAIsAudited(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	svc, st := caService(t, now, func(s store.Store, _ *secrets.Keyring) store.Store { return s })
	if v, ok, err := svc.StoredProxyCA(ctx); ok || err != nil || v.Certificates != "" {
		t.Errorf("StoredProxyCA() with none made = %v, %v, %v; want none", v, ok, err)
	}
	if _, err := st.ProxyCA(ctx); err == nil {
		t.Errorf("StoredProxyCA() made a CA")
	}
	made, err := svc.ProxyCA(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.ProxyCA(ctx)
	if err != nil || again != made {
		t.Errorf("a second ProxyCA() = %v, %v; want the CA the first made", again, err)
	}
	if v, ok, err := svc.StoredProxyCA(ctx); !ok || err != nil || v != made {
		t.Errorf("StoredProxyCA() = %v, %v, %v; want the CA made", v, ok, err)
	}
	es, err := st.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil || len(es) != 1 {
		t.Fatalf("audit after making the CA and reading it thrice = %+v, %v; want one row", es, err)
	}
	if e := es[0]; e.Box != "" || e.Route != "proxy ca rotate" || e.Method != "TEST" || e.Capability != store.ActorAdmin || e.Message != "made the egress proxy's CA" {
		t.Errorf("the CA's audit row = %+v", e)
	}

	beaten, st2 := caService(t, now, func(s store.Store, kr *secrets.Keyring) store.Store { return rival{s, kr} })
	v, err := beaten.ProxyCA(ctx)
	if theirs, _ := st2.ProxyCA(ctx); err != nil || v.Certificates != string(theirs.CertPEM) {
		t.Errorf("ProxyCA() beaten by another replica = %v, %v; want the other replica's CA", v, err)
	}
	if es, err := st2.ListAudit(ctx, store.AuditQuery{Limit: 10}); err != nil || len(es) != 0 {
		t.Errorf("a ProxyCA() another replica beat to making the CA wrote audit rows %+v, %v", es, err)
	}
}
