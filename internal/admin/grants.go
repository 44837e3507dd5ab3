package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
)

// The grant bodies are the operator service's.
type (
	GrantView   = operator.GrantView
	GrantList   = operator.GrantList
	NewGrant    = operator.NewGrant
	IssuedGrant = operator.IssuedGrant
)

// grantID checks the {id} path value: 1 to 100 printable characters with
// no space or slash (grant.Issue makes them grt_ and 16 hex digits).
func grantID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > 100 || !resourceID(id) {
		return "", operator.Errorf(operator.Invalid, "A grant ID is like %s0123456789abcdef (see GET /api/boxes/{name}/grants).", grant.IDPrefix)
	}
	return id, nil
}

func (s *Server) issueGrant(w http.ResponseWriter, r *http.Request) error {
	var ng NewGrant
	if _, err := BoxName(r); err != nil {
		return err
	}
	if err := readJSON(w, r, &ng); err != nil {
		return err
	}
	out, err := s.Op(r, 0).IssueGrant(r.Context(), r.PathValue("name"), ng)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) error {
	gs, err := s.op.ListGrants(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, GrantList{Grants: gs})
}

// revokeGrant answers DELETE /api/grants/{id}: the grant is revoked (and
// kept, to be listed as revoked). Revoking a revoked grant keeps its
// first revocation time and answers 204 again.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	id, err := grantID(r)
	if err != nil {
		return err
	}
	if err := s.Op(r, 0).RevokeGrant(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
