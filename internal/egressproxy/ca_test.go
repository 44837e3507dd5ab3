package egressproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// memCA is a store.ProxyAuthority in memory.
type memCA struct {
	mu  sync.Mutex
	rec *store.ProxyCA
}

func (m *memCA) ProxyCA(context.Context) (store.ProxyCA, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec == nil {
		return store.ProxyCA{}, store.ErrNotFound
	}
	return *m.rec, nil
}

func (m *memCA) CreateProxyCA(_ context.Context, ca store.ProxyCA) (store.ProxyCA, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec == nil {
		m.rec = &ca
	}
	return *m.rec, nil
}

func keyring(t *testing.T) *secrets.Keyring {
	key := make([]byte, 32)
	rand.Read(key)
	k, err := secrets.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestCA_LeavesAreCachedShortLivedAndRenewed: a host's leaf is minted
// once and reused, lives at most 24 hours, is signed by the CA for that
// host alone, and is minted again when less than an hour of it is left.
func TestCA_LeavesAreCachedShortLivedAndRenewed(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ca, err := LoadCA(t.Context(), &memCA{}, keyring(t), clock)
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := ca.Leaf("api.example.com"); b != a {
		t.Errorf("a second Leaf for the host minted another certificate, want the cached one")
	}
	if life := a.Leaf.NotAfter.Sub(a.Leaf.NotBefore); life > 24*time.Hour {
		t.Errorf("leaf lifetime %v, want at most 24h", life)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	opts := x509.VerifyOptions{Roots: roots, DNSName: "api.example.com", CurrentTime: now}
	if _, err := a.Leaf.Verify(opts); err != nil {
		t.Errorf("the leaf does not verify under the CA: %v", err)
	}
	opts.DNSName = "other.example.com"
	if _, err := a.Leaf.Verify(opts); err == nil {
		t.Errorf("the leaf verifies for another host")
	}
	ip, err := ca.Leaf("127.0.0.1")
	if err != nil || len(ip.Leaf.IPAddresses) != 1 || len(ip.Leaf.DNSNames) != 0 {
		t.Errorf("a leaf for an IP literal: %v, IPs %v, names %v", err, ip.Leaf.IPAddresses, ip.Leaf.DNSNames)
	}
	now = now.Add(23*time.Hour + 30*time.Minute)
	if c, _ := ca.Leaf("api.example.com"); c == a {
		t.Errorf("a leaf with under an hour left was served from the cache, want a new one")
	}
}

// TestCA_KeyIsSealed: the stored key opens only under the master key
// that sealed it, and the certificate handed out holds no key.
func TestCA_KeyIsSealed(t *testing.T) {
	st := &memCA{}
	ca, err := LoadCA(t.Context(), st, keyring(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ca.CertPEM(), []byte("PRIVATE")) {
		t.Errorf("the CA's PEM holds a private key")
	}
	if _, err := LoadCA(t.Context(), st, keyring(t), nil); err == nil {
		t.Errorf("LoadCA under another master key opened the CA's key")
	}
	if !ca.Certificate().IsCA || ca.Certificate().MaxPathLen != 0 || !ca.Certificate().MaxPathLenZero {
		t.Errorf("the CA certificate is not a CA constrained to sign leaves only")
	}
}
