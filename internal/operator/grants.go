package operator

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/store"
)

// Grants are read from the store, not a cache, on every request that
// carries one (package payer), so an issue or a revocation is in force on
// every replica once it is answered: no Changed.

// GrantView is a grant as the admin API shows it: never its value.
type GrantView struct {
	ID        string `json:"id"`
	Box       string `json:"box"`
	Principal string `json:"principal"`
	IssuedAt  string `json:"issuedAt"`
	// ExpiresAt is null for a grant that never expires (none is issued so).
	ExpiresAt *string `json:"expiresAt"`
	// RevokedAt is null while the grant is not revoked.
	RevokedAt *string `json:"revokedAt"`
	// State is current, expired or revoked.
	State string `json:"state"`
}

// GrantList answers GET /api/boxes/{name}/grants, newest first.
type GrantList struct {
	Grants []GrantView `json:"grants"`
}

// NewGrant is the body of POST /api/boxes/{name}/grants. TTL is a Go
// duration such as "15m" (default grant.DefaultTTL, at most
// grant.MaxTTL).
type NewGrant struct {
	Principal string `json:"principal"`
	TTL       string `json:"ttl,omitempty"`
}

// IssuedGrant answers POST /api/boxes/{name}/grants. Value is shown this
// once; the broker keeps only its hash. VisitorCredential says whether
// the principal holds a credential here: a grant pays for nothing until
// they do.
type IssuedGrant struct {
	Grant             GrantView `json:"grant"`
	Value             string    `json:"value"`
	VisitorCredential bool      `json:"visitorCredential"`
}

// A grant's state, as GrantView.State, the CLI's grant list and the
// owner's page all say it: one word each.
const (
	GrantCurrent = "current"
	GrantExpired = "expired"
	GrantRevoked = "revoked"
)

// GrantState says whether a grant revoked at revoked (zero: not
// revoked) that expires at expires (zero: never) stands at now:
// GrantRevoked, GrantExpired or GrantCurrent.
func GrantState(revoked, expires, now time.Time) string {
	switch {
	case !revoked.IsZero():
		return GrantRevoked
	case !expires.IsZero() && !now.Before(expires):
		return GrantExpired
	}
	return GrantCurrent
}

// grantView is how the admin API shows g at now.
func grantView(g store.Grant, now time.Time) GrantView {
	return GrantView{ID: g.ID, Box: g.Box, Principal: g.Principal, IssuedAt: formatTime(g.CreatedAt),
		ExpiresAt: optionalTime(g.ExpiresAt), RevokedAt: optionalTime(g.RevokedAt), State: GrantState(g.RevokedAt, g.ExpiresAt, now)}
}

// ParseTTL reads a grant's ttl: "" for the default.
func ParseTTL(v string) (time.Duration, error) {
	if v == "" {
		return grant.DefaultTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > grant.MaxTTL {
		return 0, Errorf(Invalid, "A grant's ttl is a duration more than 0 and at most %v, such as 15m or 2h.", grant.MaxTTL)
	}
	return d, nil
}

// IssueGrant issues a grant on box for ng's principal, valid for ng's TTL;
// its value is shown this once. Invalid for a bad principal or ttl,
// NotFound for no such box.
func (s *Service) IssueGrant(ctx context.Context, box string, ng NewGrant) (IssuedGrant, error) {
	if err := CheckBoxName(box); err != nil {
		return IssuedGrant{}, err
	}
	ttl, err := ParseTTL(ng.TTL)
	if err != nil {
		return IssuedGrant{}, err
	}
	value, g, err := grant.Issue(ctx, s.cfg.Store, box, ng.Principal, ttl, s.cfg.Now())
	switch {
	case errors.Is(err, grant.ErrTTL):
		return IssuedGrant{}, Errorf(Invalid, "A grant's ttl is more than 0 and at most %v, such as 15m.", grant.MaxTTL)
	case errors.Is(err, grant.ErrPrincipal):
		return IssuedGrant{}, Errorf(Invalid, "A grant's principal is 1 to 200 characters with no white space, such as github:<login>.")
	case err != nil:
		return IssuedGrant{}, StoreError(err, NoBox(box), "")
	}
	out := IssuedGrant{Grant: grantView(g, s.cfg.Now()), Value: value}
	_, err = s.cfg.Store.Credential(ctx, payer.VisitorAnthropic(ng.Principal))
	switch {
	case err == nil:
		out.VisitorCredential = true
	case !errors.Is(err, store.ErrNotFound):
		s.cfg.Logger.Warn("operator: grant issued, but whether its visitor holds a credential is not known", "grant", g.ID, "err", err)
	}
	return out, s.done(ctx, box, http.StatusCreated, "issued grant "+g.ID+" to "+g.Principal, "expires", formatTime(g.ExpiresAt))
}

// ListGrants returns box's grants, newest first, never their values.
// NotFound for no such box.
func (s *Service) ListGrants(ctx context.Context, box string) ([]GrantView, error) {
	if _, err := s.StoredBox(ctx, box); err != nil {
		return nil, err
	}
	gs, err := s.cfg.Store.ListGrants(ctx, box)
	now := s.cfg.Now()
	return storeViews(gs, err, func(g store.Grant) GrantView { return grantView(g, now) })
}

// RevokeGrant revokes the grant id (kept, to be listed as revoked);
// revoking a revoked grant keeps its first revocation time. NotFound for
// no such grant.
func (s *Service) RevokeGrant(ctx context.Context, id string) error {
	return s.RevokeBoxGrant(ctx, "", id)
}

// RevokeBoxGrant is RevokeGrant of one of box's grants ("": any box's),
// NotFound when box has no grant id.
func (s *Service) RevokeBoxGrant(ctx context.Context, box, id string) error {
	if len(id) > 100 || !resourceID(id) {
		// 1 to 100 printable characters with no space or slash (grant.Issue
		// makes them grt_ and 16 hex digits).
		return Errorf(Invalid, "A grant ID is like %s0123456789abcdef (see GET /api/boxes/{name}/grants).", grant.IDPrefix)
	}
	notFound := "There is no grant " + id + "."
	if box != "" {
		notFound = "Box " + box + " has no grant " + id + "."
		gs, err := s.ListGrants(ctx, box)
		if err != nil {
			return err
		}
		found := false
		for _, g := range gs {
			found = found || g.ID == id
		}
		if !found {
			return Errorf(NotFound, "%s", notFound)
		}
	}
	if err := s.cfg.Store.RevokeGrant(ctx, id, s.cfg.Now().UTC()); err != nil {
		return StoreError(err, notFound, "")
	}
	return s.done(ctx, box, http.StatusNoContent, "revoked grant "+id)
}
