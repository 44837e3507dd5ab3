package egressproxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// caAD is the additional data the CA's sealed key is opened with, so
// that a sealed value moved into its row from elsewhere does not open.
const caAD = "proxy-ca"

// Lifetimes: the CA's, and a leaf's (at most 24 hours, counted from a
// few minutes back, for clocks a little behind the broker's). A cached
// leaf is minted again once less than leafRenew of it is left.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 24 * time.Hour
	leafBackdate = 5 * time.Minute
	leafRenew    = time.Hour
	// maxLeaves bounds the leaf cache; past it, it starts again empty.
	// Leaves are minted only for hosts a secret is pinned to, so it is
	// rarely reached.
	maxLeaves = 4096
)

// CA is the proxy's certificate authority, opened: it mints a leaf
// certificate for each host it intercepts, and caches it. Its key is
// held in memory only; it is never written out, logged or printed.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	// leafKey is the key every leaf certifies: one ECDSA P-256 key made
	// at start, so that minting a leaf is one signature.
	leafKey *ecdsa.PrivateKey
	now     func() time.Time

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // guarded by mu; by host
}

// LoadCA returns the store's proxy CA, opened with keyring, making it
// first when the store holds none (ECDSA P-256, self-signed, its key
// sealed). Replicas racing to make it all end with the one stored first.
// now is the clock (nil: time.Now).
func LoadCA(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	rec, err := st.ProxyCA(ctx)
	if errors.Is(err, store.ErrNotFound) {
		var made store.ProxyCA
		if made, err = newCA(keyring, now()); err != nil {
			return nil, err
		}
		rec, err = st.CreateProxyCA(ctx, made)
	}
	if err != nil {
		return nil, fmt.Errorf("proxy CA: %w", err)
	}
	return openCA(rec, keyring, now)
}

// CertPEM reads the store's proxy CA certificate, in PEM, making the CA
// first (with keyring) when there is none.
func CertPEM(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring) ([]byte, error) {
	ca, err := LoadCA(ctx, st, keyring, nil)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM(), nil
}

func newCA(keyring *secrets.Keyring, now time.Time) (store.ProxyCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return store.ProxyCA{}, fmt.Errorf("proxy CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "boxbroker proxy CA", Organization: []string{"boxbroker"}},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return store.ProxyCA{}, fmt.Errorf("proxy CA certificate: %w", err)
	}
	raw, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return store.ProxyCA{}, fmt.Errorf("proxy CA key: %w", err)
	}
	sealed, err := keyring.Seal(raw, caAD)
	secrets.Zero(raw)
	if err != nil {
		return store.ProxyCA{}, fmt.Errorf("seal proxy CA key: %w", err)
	}
	return store.ProxyCA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), SealedKey: sealed, CreatedAt: now.UTC()}, nil
}

func openCA(rec store.ProxyCA, keyring *secrets.Keyring, now func() time.Time) (*CA, error) {
	block, _ := pem.Decode(rec.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("proxy CA: the stored certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("proxy CA: %w", err)
	}
	raw, err := keyring.Open(rec.SealedKey, caAD)
	if err != nil {
		return nil, fmt.Errorf("proxy CA: the key does not open under this master key: %w", err)
	}
	key, err := x509.ParseECPrivateKey(raw)
	secrets.Zero(raw)
	if err != nil {
		return nil, fmt.Errorf("proxy CA key: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("proxy CA: the key is not the certificate's")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("proxy leaf key: %w", err)
	}
	return &CA{cert: cert, certPEM: rec.CertPEM, key: key, leafKey: leafKey, now: now, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA's certificate in PEM, for a box image to trust.
func (ca *CA) CertPEM() []byte { return append([]byte(nil), ca.certPEM...) }

// Certificate is the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf returns a certificate for host (a DNS name or an IP literal),
// signed by the CA, from the cache while more than leafRenew of it is
// left.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	c, ok := ca.leaves[host]
	ca.mu.Unlock()
	if ok && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-leafBackdate),
		NotAfter:     now.Add(leafLifetime - leafBackdate),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("proxy leaf for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c = &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.mu.Lock()
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	ca.mu.Unlock()
	return c, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
