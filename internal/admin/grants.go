package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

func (s *Server) issueGrant(w http.ResponseWriter, r *http.Request) error {
	var ng operator.NewGrant
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
	return writeJSON(w, http.StatusOK, operator.GrantList{Grants: gs})
}

// revokeGrant answers DELETE /api/grants/{id}: the grant is revoked (and
// kept, to be listed as revoked). Revoking a revoked grant keeps its
// first revocation time and answers 204 again.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RevokeGrant(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
