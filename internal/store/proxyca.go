package store

import (
	"context"
	"time"
)

// ProxyCA is the certificate authority the HTTPS proxy (package
// egressproxy) signs its leaf certificates with: the certificate in PEM,
// which anyone may see, and its private key sealed under the master key
// (package secrets), which never leaves the broker. There is one per
// store, shared by every replica.
type ProxyCA struct {
	CertPEM   []byte
	SealedKey []byte
	CreatedAt time.Time
}

// ProxyAuthority keeps the HTTPS proxy's certificate authority.
type ProxyAuthority interface {
	// ProxyCA returns the stored authority, or ErrNotFound before one
	// was made.
	ProxyCA(ctx context.Context) (ProxyCA, error)
	// CreateProxyCA stores ca unless an authority is stored already, and
	// returns the one stored: ca, or the one another process stored
	// first. Two replicas racing at their first start so end with one.
	CreateProxyCA(ctx context.Context, ca ProxyCA) (ProxyCA, error)
}
