package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
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
	got, err := s.CreateProxyCA(ctx, first)
	if err != nil {
		t.Fatalf("CreateProxyCA(first) = %v, want nil", err)
	}
	if !sameCA(got, first) {
		t.Errorf("CreateProxyCA(first) = %q, want the first", got.CertPEM)
	}
	second := store.ProxyCA{CertPEM: []byte("cert two"), SealedKey: []byte{9}, CreatedAt: at(2)}
	got, err = s.CreateProxyCA(ctx, second)
	if err != nil {
		t.Fatalf("CreateProxyCA(second) = %v, want nil", err)
	}
	if !sameCA(got, first) {
		t.Errorf("CreateProxyCA(second) = %q, want the first kept", got.CertPEM)
	}
	got, err = s.ProxyCA(ctx)
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
	var wg sync.WaitGroup
	kept := make([]store.ProxyCA, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			kept[i], errs[i] = s.CreateProxyCA(ctx, store.ProxyCA{CertPEM: fmt.Appendf(nil, "cert %d", i), SealedKey: []byte{byte(i)}, CreatedAt: at(i)})
		})
	}
	wg.Wait()
	stored, err := s.ProxyCA(ctx)
	if err != nil {
		t.Fatalf("ProxyCA() after the race = %v", err)
	}
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
	return bytes.Equal(a.CertPEM, b.CertPEM) && bytes.Equal(a.SealedKey, b.SealedKey) && sameTime(a.CreatedAt, b.CreatedAt)
}
