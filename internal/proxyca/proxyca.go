// Package proxyca is the HTTPS egress proxy's certificate authority as
// the store keeps it: made (ECDSA P-256, self-signed, for a year, its key
// sealed with the master key), read, and rotated (a new CA that signs in
// the current one's place once a grace has passed), and opened for the
// proxy (package egressproxy) to sign a leaf certificate for each host it
// intercepts. The operator's actions on it (package operator) read and
// rotate it through this package, so that the proxy's serving stays a
// layer above them.
//
// The CA's key is held in memory only while it is opened; it is never
// written out unsealed, logged, printed or put in an error.
package proxyca

import (
	"bytes"
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

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// caAD is the additional data the CA's sealed key is opened with, so
// that a sealed value moved into its row from elsewhere does not open.
const caAD = "proxy-ca"

// Lifetimes: the CA's, and a leaf's (at most 24 hours, counted from a
// few minutes back, for clocks a little behind the broker's, and never
// past the CA's). A cached leaf is minted again once less than leafRenew
// of it is left.
const (
	// Lifetime is how long a CA the broker makes is valid. A CA has
	// no Name Constraints (the hosts of secrets are set after it is made
	// and change, and each change would need a new CA in every box), so
	// its life is bounded instead, and `boxbroker proxy ca rotate`
	// replaces it.
	Lifetime     = 365 * 24 * time.Hour
	leafLifetime = 24 * time.Hour
	leafBackdate = 5 * time.Minute
	leafRenew    = time.Hour
	// maxLeaves bounds the leaf cache; past it, it starts again empty.
	// Leaves are minted only for hosts a secret is pinned to, so it is
	// rarely reached.
	maxLeaves = 4096
)

// DefaultRotateGrace is how long after a rotation the CA it replaced
// goes on signing (Rotate), for boxes to come to trust the new one.
const DefaultRotateGrace = 7 * 24 * time.Hour

// ParseGrace reads a rotation's grace as the admin API and the owner's
// page take it: a Go duration such as 168h or 0s, and "" for
// DefaultRotateGrace. ok is false for one that is not a duration.
func ParseGrace(s string) (grace time.Duration, ok bool) {
	if s == "" {
		return DefaultRotateGrace, true
	}
	grace, err := time.ParseDuration(s)
	return grace, err == nil
}

// CA is the proxy's certificate authority, opened: it mints a leaf
// certificate, with a key of its own, for each host it intercepts, and
// caches both. Its key is held in memory only; it is never written out,
// logged or printed.
//
// The store may hold a second CA that a rotation made (Rotate); it
// signs in the first one's place from the moment the rotation set (or
// once the first one has expired), and Refresh reads a rotation made by
// another process. A CA is safe for concurrent use.
type CA struct {
	st      store.ProxyAuthority
	keyring *secrets.Keyring
	now     func() time.Time

	mu       sync.Mutex
	rec      store.ProxyCA   // guarded by mu: as last read
	cur      *authority      // guarded by mu
	next     *authority      // guarded by mu; nil when no rotation is pending
	nextFrom time.Time       // guarded by mu
	leaves   map[string]leaf // guarded by mu; by host
}

// authority is one CA, opened.
type authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
}

// leaf is a cached leaf and the authority that signed it.
type leaf struct {
	cert *tls.Certificate
	by   *authority
}

// Load returns the store's proxy CA, opened with keyring, making it
// first when the store holds none (ECDSA P-256, self-signed, for
// Lifetime, its key sealed). Replicas racing to make it all end with
// the one stored first. now is the clock (nil: time.Now).
func Load(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time) (*CA, error) {
	ca, _, err := LoadOrMake(ctx, st, keyring, now)
	return ca, err
}

// LoadOrMake is Load, and says whether this call made the CA: made is
// false when the store held one, or when a racing replica's was stored
// first.
func LoadOrMake(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time) (ca *CA, made bool, err error) {
	defaults.Clock(&now)
	rec, err := st.ProxyCA(ctx)
	if errors.Is(err, store.ErrNotFound) {
		var mine store.ProxyCA
		if mine, err = newCA(keyring, now()); err != nil {
			return nil, false, err
		}
		rec, err = st.CreateProxyCA(ctx, mine)
		made = err == nil && bytes.Equal(rec.CertPEM, mine.CertPEM)
	}
	if err != nil {
		return nil, false, fmt.Errorf("proxy CA: %w", err)
	}
	ca, err = opened(st, keyring, now, rec)
	return ca, made, err
}

// Open returns the store's proxy CA, opened with keyring, and never
// makes one: its error wraps store.ErrNotFound while the store holds
// none. now is the clock (nil: time.Now).
func Open(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time) (*CA, error) {
	defaults.Clock(&now)
	rec, err := st.ProxyCA(ctx)
	if err != nil {
		return nil, fmt.Errorf("proxy CA: %w", err)
	}
	return opened(st, keyring, now, rec)
}

// opened is the CA rec, as the store holds it, opened with keyring.
func opened(st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time, rec store.ProxyCA) (*CA, error) {
	ca := &CA{st: st, keyring: keyring, now: now, leaves: map[string]leaf{}}
	if err := ca.open(rec); err != nil {
		return nil, err
	}
	return ca, nil
}

// ErrRaced is the error of a rotation that another process's change to
// the stored CA overtook: nothing was rotated by it, and it may be run
// again.
var ErrRaced = errors.New("proxy CA: another process changed the CA as this rotation ran; nothing was rotated by this one, so run it again")

// Rotate makes a new CA to sign in place of the store's from grace
// after now (at once for a grace of 0 or less, for a key that must not
// sign again), and returns its certificate in PEM and that moment. Until
// then the current CA goes on signing and CertPEM hands out both, so
// boxes can come to trust the new one; from then the current one is
// gone. A rotation still pending is replaced (its CA never signed); one
// whose moment has passed is made the current CA first. With no CA
// stored, Rotate makes the first. Two rotations racing end with one;
// the other returns ErrRaced. Other errors are the store's, wrapped.
func Rotate(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, grace time.Duration, now time.Time) (certPEM []byte, from time.Time, err error) {
	was, err := st.ProxyCA(ctx)
	if errors.Is(err, store.ErrNotFound) {
		ca, err := Load(ctx, st, keyring, func() time.Time { return now })
		if err != nil {
			return nil, time.Time{}, err
		}
		return ca.CertPEM(), now, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("proxy CA: %w", err)
	}
	rec := was
	if len(rec.NextCertPEM) > 0 && !now.Before(rec.NextFrom) {
		rec = store.ProxyCA{CertPEM: rec.NextCertPEM, SealedKey: rec.NextSealedKey, CreatedAt: rec.NextFrom}
	}
	made, err := newCA(keyring, now)
	if err != nil {
		return nil, time.Time{}, err
	}
	from = now
	if grace <= 0 {
		rec = made
	} else {
		from = now.Add(grace).UTC()
		rec.NextCertPEM, rec.NextSealedKey, rec.NextFrom = made.CertPEM, made.SealedKey, from
	}
	kept, err := st.ReplaceProxyCA(ctx, was, rec)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("proxy CA: %w", err)
	}
	if !bytes.Equal(kept.CertPEM, rec.CertPEM) || !bytes.Equal(kept.NextCertPEM, rec.NextCertPEM) {
		return nil, time.Time{}, ErrRaced
	}
	return made.CertPEM, from, nil
}

func newCA(keyring *secrets.Keyring, now time.Time) (store.ProxyCA, error) {
	tmpl := &x509.Certificate{
		// Each CA has its own name, so that clients that trust an old and
		// a new one across a rotation tell them apart.
		Subject:               pkix.Name{CommonName: "boxbroker proxy CA " + now.UTC().Format("2006-01-02T15:04:05Z"), Organization: []string{"boxbroker"}},
		NotBefore:             now.Add(-leafBackdate),
		NotAfter:              now.Add(Lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	key, der, err := issue(tmpl, nil)
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

// open makes rec the CA's, opening its authorities.
func (ca *CA) open(rec store.ProxyCA) error {
	cur, err := openAuthority(rec.CertPEM, rec.SealedKey, ca.keyring)
	if err != nil {
		return err
	}
	var next *authority
	if len(rec.NextCertPEM) > 0 {
		if next, err = openAuthority(rec.NextCertPEM, rec.NextSealedKey, ca.keyring); err != nil {
			return fmt.Errorf("the rotation's %w", err)
		}
	}
	ca.mu.Lock()
	ca.rec, ca.cur, ca.next, ca.nextFrom = rec, cur, next, rec.NextFrom
	ca.mu.Unlock()
	return nil
}

func openAuthority(certPEM, sealedKey []byte, keyring *secrets.Keyring) (*authority, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("proxy CA: the stored certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("proxy CA: %w", err)
	}
	raw, err := keyring.Open(sealedKey, caAD)
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
	return &authority{cert: cert, certPEM: certPEM, key: key}, nil
}

// Refresh reads the store's CA again, so that a rotation another process
// made (boxbroker proxy ca rotate) is followed; leaves are minted anew
// by the CA that signs from then on. An error leaves the CA as it was.
func (ca *CA) Refresh(ctx context.Context) error {
	rec, err := ca.st.ProxyCA(ctx)
	if err != nil {
		return fmt.Errorf("proxy CA: %w", err)
	}
	ca.mu.Lock()
	same := bytes.Equal(rec.CertPEM, ca.rec.CertPEM) && bytes.Equal(rec.NextCertPEM, ca.rec.NextCertPEM) && rec.NextFrom.Equal(ca.rec.NextFrom)
	ca.mu.Unlock()
	if same {
		return nil
	}
	return ca.open(rec)
}

// signerLocked is the authority that signs at now: the rotation's from
// its moment on, or once the current one has expired.
func (ca *CA) signerLocked(now time.Time) *authority {
	if ca.next != nil && (!now.Before(ca.nextFrom) || !now.Before(ca.cur.cert.NotAfter)) {
		return ca.next
	}
	return ca.cur
}

// CertPEM is the CA's certificate in PEM, for a box image to trust: the
// one that signs now, and while a rotation is pending, the one that
// signs after it, so a box trusting both is served across the switch.
func (ca *CA) CertPEM() []byte {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	s := ca.signerLocked(ca.now())
	out := append([]byte(nil), s.certPEM...)
	if s != ca.next && ca.next != nil {
		out = append(out, ca.next.certPEM...)
	}
	return out
}

// NextFrom is the moment the CA a pending rotation made signs from, the
// zero time when no rotation is pending or its CA signs already.
func (ca *CA) NextFrom() time.Time {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if ca.next == nil || ca.signerLocked(ca.now()) == ca.next {
		return time.Time{}
	}
	return ca.nextFrom
}

// warnBefore is how long before the signing CA expires Warning says to
// rotate it, when no rotation is pending.
const warnBefore = 30 * 24 * time.Hour

// Warning is what the operator should hear about the CA, or "": that the
// CA that signs has expired, expires within 30 days with no rotation
// pending, or lives longer than Lifetime (made by an older boxbroker).
func (ca *CA) Warning() string {
	now := ca.now()
	ca.mu.Lock()
	defer ca.mu.Unlock()
	s := ca.signerLocked(now)
	end := s.cert.NotAfter.UTC().Format(time.RFC3339)
	switch {
	case !now.Before(s.cert.NotAfter):
		return "the egress proxy's CA expired at " + end + ", so no box trusts the proxy's leaves; rotate it (boxbroker proxy ca rotate --grace 0) and give boxes the new certificate"
	case ca.next != nil && s != ca.next:
		return ""
	case s.cert.NotAfter.Sub(now) < warnBefore:
		return "the egress proxy's CA expires at " + end + "; rotate it ahead (boxbroker proxy ca rotate) and give boxes the new certificate"
	case s.cert.NotAfter.Sub(s.cert.NotBefore) > Lifetime+24*time.Hour:
		return "the egress proxy's CA is valid until " + end + ", longer than the year the broker makes a CA for; rotate it (boxbroker proxy ca rotate) and give boxes the new certificate"
	}
	return ""
}

// Leaf returns a certificate for host (a DNS name or an IP literal),
// with an ECDSA P-256 key of its own, signed by the CA that signs now,
// from the cache while more than leafRenew of it is left. It fails when
// that CA has expired.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	signer := ca.signerLocked(now)
	c, ok := ca.leaves[host]
	ca.mu.Unlock()
	if ok && c.by == signer && now.Add(leafRenew).Before(c.cert.Leaf.NotAfter) {
		return c.cert, nil
	}
	notAfter := now.Add(leafLifetime - leafBackdate)
	if end := signer.cert.NotAfter; end.Before(notAfter) {
		notAfter = end
	}
	if !now.Before(notAfter) {
		return nil, fmt.Errorf("proxy leaf for %s: the proxy CA expired at %s; rotate it (boxbroker proxy ca rotate)", host, notAfter.UTC().Format(time.RFC3339))
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: host},
		NotBefore:   now.Add(-leafBackdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	key, der, err := issue(tmpl, signer)
	if err != nil {
		return nil, fmt.Errorf("proxy leaf for %s: %w", host, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	cert := &tls.Certificate{Certificate: [][]byte{der, signer.cert.Raw}, PrivateKey: key, Leaf: parsed}
	ca.mu.Lock()
	if len(ca.leaves) >= maxLeaves {
		clear(ca.leaves)
	}
	ca.leaves[host] = leaf{cert: cert, by: signer}
	ca.mu.Unlock()
	return cert, nil
}

// issue makes an ECDSA P-256 key and a certificate for it from tmpl,
// with a random serial number, signed by parent, or self-signed when
// parent is nil.
func issue(tmpl *x509.Certificate, parent *authority) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, nil, err
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	return key, der, err
}
