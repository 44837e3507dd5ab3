package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

func testProxyCA(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.ProxyCA(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ProxyCA() before any = %v, want ErrNotFound", err)
	}
	seq := lastChange(t, s)
	first := store.ProxyCA{CertPEM: []byte("cert one"), SealedKey: []byte{0, 1, 2, 255}, CreatedAt: at(1)}
	answer(s.CreateProxyCA(ctx, first)).is(t, "CreateProxyCA(first) (want the first)", first)
	next := store.ProxyCA{CertPEM: []byte("cert two"), SealedKey: []byte{9}, CreatedAt: at(2)}
	answer(s.CreateProxyCA(ctx, next)).is(t, "CreateProxyCA(second) (want the first kept)", first)
	answer(s.ProxyCA(ctx)).is(t, "ProxyCA() (want the first)", first)
	noChange(t, s, "CreateProxyCA", seq)
}

// testConcurrentCreateProxyCA: replicas racing at their first start all
// end with the one authority stored.
func testConcurrentCreateProxyCA(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	kept := make([]store.ProxyCA, n)
	errs := atOnce(n, func(i int) (err error) {
		kept[i], err = s.CreateProxyCA(ctx, store.ProxyCA{CertPEM: fmt.Appendf(nil, "cert %d", i), SealedKey: []byte{byte(i)}, CreatedAt: at(i)})
		return err
	})
	stored := answer(s.ProxyCA(ctx)).must(t, "ProxyCA() after the race")
	for i := range n {
		if errs[i] != nil {
			t.Errorf("CreateProxyCA(%d) = %v, want nil", i, errs[i])
			continue
		}
		same(t, fmt.Sprintf("CreateProxyCA(%d) (want the one stored)", i), stored, kept[i])
	}
}

// testReplaceProxyCA: a rotation replaces the stored authority only when
// it is still the one the rotation read (a pending next one included),
// and a pending next one is kept and cleared as written.
func testReplaceProxyCA(t *testing.T, s store.Store) {
	ctx := t.Context()
	if _, err := s.ReplaceProxyCA(ctx, store.ProxyCA{CertPEM: []byte("x")}, store.ProxyCA{CertPEM: []byte("y"), SealedKey: []byte{1}, CreatedAt: at(1)}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReplaceProxyCA() before any = %v, want ErrNotFound", err)
	}
	first := store.ProxyCA{CertPEM: []byte("cert one"), SealedKey: []byte{1}, CreatedAt: at(1)}
	must(t, "CreateProxyCA(first)", second(s.CreateProxyCA(ctx, first)))
	seq := lastChange(t, s)
	pending := first
	pending.NextCertPEM, pending.NextSealedKey, pending.NextFrom = []byte("cert two"), []byte{2, 0, 255}, at(9)
	got, err := s.ReplaceProxyCA(ctx, first, pending)
	if d := diff(pending, got); err != nil || d != "" {
		t.Fatalf("ReplaceProxyCA(first → pending) = %v, want the pending one (-want +got):\n%s", err, d)
	}
	answer(s.ProxyCA(ctx)).is(t, "ProxyCA() (want the pending one)", pending)
	// A rotation that read first, before the pending one was written,
	// replaces nothing.
	stale := store.ProxyCA{CertPEM: []byte("cert three"), SealedKey: []byte{3}, CreatedAt: at(3)}
	answer(s.ReplaceProxyCA(ctx, first, stale)).is(t, "ReplaceProxyCA(a stale was) (want the pending one kept)", pending)
	// The switch: the next one becomes the only one.
	switched := store.ProxyCA{CertPEM: pending.NextCertPEM, SealedKey: pending.NextSealedKey, CreatedAt: at(9)}
	answer(s.ReplaceProxyCA(ctx, pending, switched)).is(t, "ReplaceProxyCA(pending → switched)", switched)
	answer(s.ProxyCA(ctx)).is(t, "ProxyCA() (want the switched one with none pending)", switched)
	noChange(t, s, "ReplaceProxyCA", seq)
}
