package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/store"
)

// ProxyCAView is the egress proxy's CA as a box is to trust it; never
// its key.
type ProxyCAView struct {
	// Certificates are the certificates a box trusts, in PEM: the CA that
	// signs now and, while a rotation is pending, the one that signs from
	// NextFrom, so that a box trusting both is served across the switch.
	Certificates string `json:"certificates"`
	// NextFrom is when a pending rotation's CA signs from; null when none
	// is pending.
	NextFrom *string `json:"nextFrom"`
}

// ProxyCARotation is what a rotation of the egress proxy's CA made: the
// new CA's certificate, in PEM, and the moment it signs from.
type ProxyCARotation struct {
	Certificate string `json:"certificate"`
	From        string `json:"from"`
}

// ProxyCA returns the certificates of the egress proxy's CA a box is to
// trust, making the CA first (its key sealed under the Keyring) when the
// store holds none, and then writing its audit row; for a ReadOnly
// origin, which makes nothing, Forbidden while the store holds none. An
// internal error without a Keyring.
func (s *Service) ProxyCA(ctx context.Context) (ProxyCAView, error) {
	if s.cfg.Keyring == nil {
		return ProxyCAView{}, errors.New("proxy CA: the operator service has no keyring")
	}
	if s.origin.ReadOnly {
		// A reader makes nothing: the CA is shown if there is one.
		v, ok, err := s.StoredProxyCA(ctx)
		if err == nil && !ok {
			return v, Errorf(Forbidden, "There is no egress proxy CA yet, and a viewer's admin token makes none: `boxbroker proxy ca`, serve --proxy-listen, or GET /api/proxy/ca with an operator's admin token makes it.")
		}
		return v, err
	}
	ca, made, err := proxyca.LoadOrMake(ctx, s.cfg.Store, s.cfg.Keyring, s.cfg.Now)
	if err != nil {
		return ProxyCAView{}, StoreError(err, "", "")
	}
	v := proxyCAView(ca)
	if made {
		if err := s.done(ctx, "", http.StatusOK, "made the egress proxy's CA"); err != nil {
			return ProxyCAView{}, err
		}
	}
	return v, nil
}

// StoredProxyCA is ProxyCA for a look that is no reason to make a CA (the
// owner's page): it never makes one, and ok is false, with no error,
// while the store holds none.
func (s *Service) StoredProxyCA(ctx context.Context) (v ProxyCAView, ok bool, err error) {
	if s.cfg.Keyring == nil {
		return v, false, errors.New("proxy CA: the operator service has no keyring")
	}
	ca, err := proxyca.Open(ctx, s.cfg.Store, s.cfg.Keyring, s.cfg.Now)
	if errors.Is(err, store.ErrNotFound) {
		return v, false, nil
	}
	if err != nil {
		return v, false, StoreError(err, "", "")
	}
	return proxyCAView(ca), true, nil
}

// proxyCAView is how ProxyCA shows ca.
func proxyCAView(ca *proxyca.CA) ProxyCAView {
	return ProxyCAView{Certificates: string(ca.CertPEM()), NextFrom: optionalTime(ca.NextFrom())}
}

// RotateProxyCA makes a new CA for the egress proxy, to sign in place of
// the current one once grace has passed (at once for 0, for a key that
// must not sign again), and returns its certificate and that moment; a
// running proxy reads it within a minute. Until then the current CA goes
// on signing and ProxyCA hands out both. Invalid for a grace below 0;
// Conflict when another rotation overtook it (nothing was rotated).
func (s *Service) RotateProxyCA(ctx context.Context, grace time.Duration) (ProxyCARotation, error) {
	if grace < 0 {
		return ProxyCARotation{}, Errorf(Invalid, "The grace is a duration of 0 or more, such as 168h.")
	}
	if s.cfg.Keyring == nil {
		return ProxyCARotation{}, errors.New("rotate proxy CA: the operator service has no keyring")
	}
	cert, from, err := proxyca.Rotate(ctx, s.cfg.Store, s.cfg.Keyring, grace, s.cfg.Now())
	if errors.Is(err, proxyca.ErrRaced) {
		return ProxyCARotation{}, Errorf(Conflict, "%s", proxyca.ErrRaced.Error())
	}
	if err != nil {
		return ProxyCARotation{}, StoreError(err, "", "")
	}
	r := ProxyCARotation{Certificate: string(cert), From: formatTime(from)}
	if err := s.done(ctx, "", http.StatusOK, fmt.Sprintf("rotated the egress proxy's CA; the new one signs from %s", r.From), "grace", grace.String()); err != nil {
		return ProxyCARotation{}, err
	}
	return r, nil
}
