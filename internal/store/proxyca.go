package store

import (
	"context"
	"time"
)

// ProxyCA is the certificate authority the HTTPS proxy (package
// egressproxy) signs its leaf certificates with: the certificate in PEM,
// which anyone may see, and its private key sealed under the master key
// (package secrets), which never leaves the broker. There is one per
// store, shared by every replica, and at most one more that a rotation
// made to take its place.
type ProxyCA struct {
	CertPEM   []byte
	SealedKey []byte
	CreatedAt time.Time
	// NextCertPEM and NextSealedKey are the authority a rotation made,
	// which signs in this one's place from NextFrom on; all three are
	// empty when no rotation is pending.
	NextCertPEM   []byte
	NextSealedKey []byte
	NextFrom      time.Time
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
	// ReplaceProxyCA stores ca in place of the stored authority when that
	// is still was (the same CertPEM and NextCertPEM), and returns the
	// one stored after: ca, or what another process stored since was was
	// read. It returns ErrNotFound when none is stored. Two rotations
	// racing so end with one.
	ReplaceProxyCA(ctx context.Context, was, ca ProxyCA) (ProxyCA, error)
}
