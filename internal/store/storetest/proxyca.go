package storetest

import (
	"bytes"
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
	got := answer(s.CreateProxyCA(ctx, first)).must(t, "CreateProxyCA(first)")
	if !sameCA(got, first) {
		t.Errorf("CreateProxyCA(first) = %q, want the first", got.CertPEM)
	}
	second := store.ProxyCA{CertPEM: []byte("cert two"), SealedKey: []byte{9}, CreatedAt: at(2)}
	got = answer(s.CreateProxyCA(ctx, second)).must(t, "CreateProxyCA(second)")
	if !sameCA(got, first) {
		t.Errorf("CreateProxyCA(second) = %q, want the first kept", got.CertPEM)
	}
	got, err := s.ProxyCA(ctx)
	if err != nil || !sameCA(got, first) {
		t.Errorf("ProxyCA() = %q, %v, want the first", got.CertPEM, err)
	}
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
		if !sameCA(kept[i], stored) {
			t.Errorf("CreateProxyCA(%d) = %q, want the stored %q", i, kept[i].CertPEM, stored.CertPEM)
		}
	}
}

func sameCA(a, b store.ProxyCA) bool {
	return bytes.Equal(a.CertPEM, b.CertPEM) && bytes.Equal(a.SealedKey, b.SealedKey) && sameTime(a.CreatedAt, b.CreatedAt) &&
		bytes.Equal(a.NextCertPEM, b.NextCertPEM) && bytes.Equal(a.NextSealedKey, b.NextSealedKey) &&
		(a.NextFrom.IsZero() && b.NextFrom.IsZero() || sameTime(a.NextFrom, b.NextFrom))
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
	if err != nil || !sameCA(got, pending) {
		t.Fatalf("ReplaceProxyCA(first → pending) = %q %q, %v, want the pending one", got.CertPEM, got.NextCertPEM, err)
	}
	if got, err := s.ProxyCA(ctx); err != nil || !sameCA(got, pending) {
		t.Errorf("ProxyCA() = %q %q %v, %v, want the pending one", got.CertPEM, got.NextCertPEM, got.NextFrom, err)
	}
	// A rotation that read first, before the pending one was written,
	// replaces nothing.
	stale := store.ProxyCA{CertPEM: []byte("cert three"), SealedKey: []byte{3}, CreatedAt: at(3)}
	if got, err := s.ReplaceProxyCA(ctx, first, stale); err != nil || !sameCA(got, pending) {
		t.Errorf("ReplaceProxyCA(a stale was) = %q %q, %v, want the pending one kept", got.CertPEM, got.NextCertPEM, err)
	}
	// The switch: the next one becomes the only one.
	switched := store.ProxyCA{CertPEM: pending.NextCertPEM, SealedKey: pending.NextSealedKey, CreatedAt: at(9)}
	if got, err := s.ReplaceProxyCA(ctx, pending, switched); err != nil || !sameCA(got, switched) {
		t.Errorf("ReplaceProxyCA(pending → switched) = %q %q, %v, want the switched one", got.CertPEM, got.NextCertPEM, err)
	}
	if got, err := s.ProxyCA(ctx); err != nil || !sameCA(got, switched) || len(got.NextCertPEM) != 0 || !got.NextFrom.IsZero() {
		t.Errorf("ProxyCA() = %q %q %v, %v, want the switched one with none pending", got.CertPEM, got.NextCertPEM, got.NextFrom, err)
	}
	noChange(t, s, "ReplaceProxyCA", seq)
}
