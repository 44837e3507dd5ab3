package egressproxy

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// The proxy's CA is package proxyca's. These names forward to it until
// the CLI reads the CA there.

// CA is proxyca.CA.
type CA = proxyca.CA

// DefaultRotateGrace is proxyca.DefaultRotateGrace.
const DefaultRotateGrace = proxyca.DefaultRotateGrace

// LoadCA is proxyca.Load.
func LoadCA(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, now func() time.Time) (*CA, error) {
	return proxyca.Load(ctx, st, keyring, now)
}

// CertPEM is the store's CA certificates, as proxyca.CA.CertPEM.
func CertPEM(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring) ([]byte, error) {
	ca, err := proxyca.Load(ctx, st, keyring, nil)
	if err != nil {
		return nil, err
	}
	return ca.CertPEM(), nil
}

// RotateCA is proxyca.Rotate.
func RotateCA(ctx context.Context, st store.ProxyAuthority, keyring *secrets.Keyring, grace time.Duration, now time.Time) ([]byte, time.Time, error) {
	return proxyca.Rotate(ctx, st, keyring, grace, now)
}
