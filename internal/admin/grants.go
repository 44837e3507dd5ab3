package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/store"
)

// Grants are read from the store, not a cache, on every request that
// carries one (package payer), so an issue or a revocation the admin API
// has answered is in force on every replica already: no Cache.Settle.

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

// GrantState says whether a grant revoked at revoked (zero: not
// revoked) that expires at expires (zero: never) stands at now:
// "revoked", "expired" or "current".
func GrantState(revoked, expires, now time.Time) string {
	switch {
	case !revoked.IsZero():
		return "revoked"
	case !expires.IsZero() && !now.Before(expires):
		return "expired"
	}
	return "current"
}

// grantView is how the admin API shows g at now.
func grantView(g store.Grant, now time.Time) GrantView {
	v := GrantView{ID: g.ID, Box: g.Box, Principal: g.Principal, IssuedAt: formatTime(g.CreatedAt),
		State: GrantState(g.RevokedAt, g.ExpiresAt, now)}
	if !g.ExpiresAt.IsZero() {
		at := formatTime(g.ExpiresAt)
		v.ExpiresAt = &at
	}
	if !g.RevokedAt.IsZero() {
		at := formatTime(g.RevokedAt)
		v.RevokedAt = &at
	}
	return v
}

// grantID checks the {id} path value: 1 to 100 printable characters with
// no space or slash (grant.Issue makes them grt_ and 16 hex digits).
func grantID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > 100 || !resourceID(id) {
		return "", operator.Errorf(operator.Invalid, "A grant ID is like %s0123456789abcdef (see GET /api/boxes/{name}/grants).", grant.IDPrefix)
	}
	return id, nil
}

// IssueGrant issues a grant for principal on box valid for ttl (0 means
// grant.DefaultTTL), as POST /api/boxes/{name}/grants and the owner's
// page do. Its errors are refusals: 400 for a bad principal or ttl, 404
// for no such box.
func (s *Server) IssueGrant(ctx context.Context, box, principal string, ttl time.Duration) (IssuedGrant, error) {
	value, g, err := grant.Issue(ctx, s.cfg.Store, box, principal, ttl, s.cfg.Now())
	switch {
	case errors.Is(err, grant.ErrTTL):
		return IssuedGrant{}, operator.Errorf(operator.Invalid,
			"A grant's ttl is more than 0 and at most %v, such as 15m.", grant.MaxTTL)
	case errors.Is(err, grant.ErrPrincipal):
		return IssuedGrant{}, operator.Errorf(operator.Invalid,
			"A grant's principal is 1 to 200 characters with no white space, such as github:<login>.")
	case err != nil:
		return IssuedGrant{}, operator.StoreError(err, fmt.Sprintf("There is no box named %s.", box), "")
	}
	out := IssuedGrant{Grant: grantView(g, s.cfg.Now()), Value: value}
	_, err = s.cfg.Store.Credential(ctx, payer.VisitorAnthropic(principal))
	switch {
	case err == nil:
		out.VisitorCredential = true
	case !errors.Is(err, store.ErrNotFound):
		s.log.Warn("admin: grant issued, but whether its visitor holds a credential is not known", "grant", g.ID, "err", err)
	}
	s.log.Info("admin: grant issued", "box", box, "grant", g.ID, "principal", principal,
		"expires", formatTime(g.ExpiresAt), "visitor_credential", out.VisitorCredential)
	return out, nil
}

// ParseTTL reads a grant's ttl: "" for the default.
func ParseTTL(v string) (time.Duration, error) {
	if v == "" {
		return grant.DefaultTTL, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > grant.MaxTTL {
		return 0, operator.Errorf(operator.Invalid,
			"A grant's ttl is a duration more than 0 and at most %v, such as 15m or 2h.", grant.MaxTTL)
	}
	return d, nil
}

func (s *Server) issueGrant(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var ng NewGrant
	if err := readJSON(w, r, &ng); err != nil {
		return err
	}
	ttl, err := ParseTTL(ng.TTL)
	if err != nil {
		return err
	}
	out, err := s.IssueGrant(r.Context(), name, ng.Principal, ttl)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Box(r)
	if err != nil {
		return err
	}
	gs, err := s.cfg.Store.ListGrants(r.Context(), b.Name)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	now := s.cfg.Now()
	out := GrantList{Grants: []GrantView{}}
	for _, g := range gs {
		out.Grants = append(out.Grants, grantView(g, now))
	}
	return writeJSON(w, http.StatusOK, out)
}

// revokeGrant answers DELETE /api/grants/{id}: the grant is revoked (and
// kept, to be listed as revoked). Revoking a revoked grant keeps its
// first revocation time and answers 204 again.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	id, err := grantID(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.RevokeGrant(r.Context(), id, s.cfg.Now().UTC()); err != nil {
		return operator.StoreError(err, fmt.Sprintf("There is no grant %s.", id), "")
	}
	s.log.Info("admin: grant revoked", "grant", id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
