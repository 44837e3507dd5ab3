package proxyca

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Certificate is the certificate of the CA that signs now.
func (ca *CA) Certificate() *x509.Certificate {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	return ca.signerLocked(ca.now()).cert
}

// Pending is the certificate of the CA a rotation made and the moment
// it signs from, or nil when no rotation is pending.
func (ca *CA) Pending() (*x509.Certificate, time.Time) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if ca.next == nil || ca.signerLocked(ca.now()) == ca.next {
		return nil, time.Time{}
	}
	return ca.next.cert, ca.nextFrom
}

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

func (m *memCA) ReplaceProxyCA(_ context.Context, was, ca store.ProxyCA) (store.ProxyCA, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rec == nil {
		return store.ProxyCA{}, store.ErrNotFound
	}
	if bytes.Equal(m.rec.CertPEM, was.CertPEM) && bytes.Equal(m.rec.NextCertPEM, was.NextCertPEM) {
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
	ca, err := Load(t.Context(), &memCA{}, keyring(t), clock)
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
	ca, err := Load(t.Context(), st, keyring(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ca.CertPEM(), []byte("PRIVATE")) {
		t.Errorf("the CA's PEM holds a private key")
	}
	if _, err := Load(t.Context(), st, keyring(t), nil); err == nil {
		t.Errorf("Load under another master key opened the CA's key")
	}
	if !ca.Certificate().IsCA || ca.Certificate().MaxPathLen != 0 || !ca.Certificate().MaxPathLenZero {
		t.Errorf("the CA certificate is not a CA constrained to sign leaves only")
	}
}

// TestCA_EachLeafHasItsOwnKey: leaves for two hosts do not share a key,
// nor share the CA's, so the key of one host's leaf (held in memory for
// its tunnels) signs for no other host.
func TestCA_EachLeafHasItsOwnKey(t *testing.T) {
	ca, err := Load(t.Context(), &memCA{}, keyring(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, host := range []string{"api.example.com", "other.example.com", "127.0.0.1"} {
		c, err := ca.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := x509.MarshalPKIXPublicKey(c.Leaf.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := seen[string(pub)]; ok {
			t.Errorf("the leaves for %s and %s share a key", other, host)
		}
		seen[string(pub)] = host
		if k, ok := c.PrivateKey.(*ecdsa.PrivateKey); !ok || k.Curve != elliptic.P256() || !k.PublicKey.Equal(c.Leaf.PublicKey) {
			t.Errorf("the leaf for %s: its private key is not its certificate's ECDSA P-256 key", host)
		}
	}
	caPub, _ := x509.MarshalPKIXPublicKey(ca.Certificate().PublicKey)
	if host, ok := seen[string(caPub)]; ok {
		t.Errorf("the leaf for %s has the CA's key", host)
	}
}

// TestCA_LifetimeIsBounded: the CA the broker makes is valid for a
// year, not ten, and a leaf never outlives the CA that signs it: past
// the CA's end no leaf is minted.
func TestCA_LifetimeIsBounded(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ca, err := Load(t.Context(), &memCA{}, keyring(t), clock)
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.Certificate()
	if life := cert.NotAfter.Sub(cert.NotBefore); life > 366*24*time.Hour {
		t.Errorf("the CA's lifetime is %v, want at most a year", life)
	}
	if w := ca.Warning(); w != "" {
		t.Errorf("a new CA's Warning = %q, want none", w)
	}
	now = cert.NotAfter.Add(-time.Hour)
	c, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf.NotAfter.After(cert.NotAfter) {
		t.Errorf("a leaf minted an hour before the CA's end lives until %v, past the CA's %v", c.Leaf.NotAfter, cert.NotAfter)
	}
	if w := ca.Warning(); !strings.Contains(w, "rotate") {
		t.Errorf("the Warning of a CA an hour from its end = %q, want it to say to rotate", w)
	}
	now = cert.NotAfter.Add(time.Minute)
	if _, err := ca.Leaf("other.example.com"); err == nil || !strings.Contains(err.Error(), "rotate") {
		t.Errorf("a leaf from an expired CA: %v, want an error saying to rotate", err)
	}
}

// TestCA_RotationMovesLeavesToTheNewCA: after a rotation, the current CA
// signs until the grace has passed while CertPEM hands out both; then
// new leaves chain to the new CA alone, for this process (Refresh) and
// for another that loads the CA. A rotation with no grace switches at
// once.
func TestCA_RotationMovesLeavesToTheNewCA(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st, kr := &memCA{}, keyring(t)
	ca, err := Load(t.Context(), st, kr, clock)
	if err != nil {
		t.Fatal(err)
	}
	old := ca.Certificate()
	newPEM, from, err := Rotate(t.Context(), st, kr, 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if !from.Equal(now.Add(24 * time.Hour)) {
		t.Errorf("Rotate's switch at %v, want a day from now", from)
	}
	fresh := parsePEM(t, newPEM)
	if len(fresh) != 1 || fresh[0].Equal(old) || !fresh[0].IsCA {
		t.Fatalf("Rotate printed %d certificates, want the one new CA", len(fresh))
	}
	if err := ca.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := parsePEM(t, ca.CertPEM()); len(got) != 2 || !got[0].Equal(old) || !got[1].Equal(fresh[0]) {
		t.Errorf("CertPEM during the grace holds %d certificates, want the current and the new", len(got))
	}
	if pending, at := ca.Pending(); pending == nil || !pending.Equal(fresh[0]) || !at.Equal(from) {
		t.Errorf("Pending() = %v, %v, want the new CA from %v", pending != nil, at, from)
	}
	if at := ca.NextFrom(); !at.Equal(from) {
		t.Errorf("NextFrom() = %v during the grace, want %v", at, from)
	}
	chainsTo(t, ca, "api.example.com", now, old, fresh[0])

	now = from
	chainsTo(t, ca, "api.example.com", now, fresh[0], old)
	if at := ca.NextFrom(); !at.IsZero() {
		t.Errorf("NextFrom() = %v once the new CA signs, want none", at)
	}
	if got := parsePEM(t, ca.CertPEM()); len(got) != 1 || !got[0].Equal(fresh[0]) {
		t.Errorf("CertPEM after the switch holds %d certificates, want the new one alone", len(got))
	}
	replica, err := Load(t.Context(), st, kr, clock)
	if err != nil {
		t.Fatal(err)
	}
	chainsTo(t, replica, "other.example.com", now, fresh[0], old)

	// No grace: the next leaf is the newest CA's.
	newestPEM, _, err := Rotate(t.Context(), st, kr, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	newest := parsePEM(t, newestPEM)[0]
	if err := ca.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	chainsTo(t, ca, "api.example.com", now, newest, fresh[0])
	if got := parsePEM(t, ca.CertPEM()); len(got) != 1 || !got[0].Equal(newest) {
		t.Errorf("CertPEM after a rotation with no grace holds %d certificates, want the newest alone", len(got))
	}
}

// chainsTo checks that host's leaf from ca verifies under want and not
// under notUnder.
func chainsTo(t *testing.T, ca *CA, host string, now time.Time, want, notUnder *x509.Certificate) {
	t.Helper()
	c, err := ca.Leaf(host)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		root *x509.Certificate
		ok   bool
	}{{want, true}, {notUnder, false}} {
		roots := x509.NewCertPool()
		roots.AddCert(tt.root)
		_, err := c.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: now})
		if (err == nil) != tt.ok {
			t.Errorf("the leaf for %s verifies under %s: %v, want %v", host, tt.root.Subject.CommonName, err == nil, tt.ok)
		}
	}
}

func parsePEM(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

// TestParseGrace: a rotation's grace is a Go duration, "" the default,
// and anything else is refused.
func TestParseGrace(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", DefaultRotateGrace, true},
		{"0s", 0, true},
		{"48h", 48 * time.Hour, true},
		{"-1h", -time.Hour, true}, // the service refuses it, saying why
		{"a week", 0, false},
		{"168", 0, false},
	} {
		if got, ok := ParseGrace(tt.in); ok != tt.ok || ok && got != tt.want {
			t.Errorf("ParseGrace(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
