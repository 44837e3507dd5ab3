package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

func (s *Server) issueGrant(r *http.Request, ng operator.NewGrant) (operator.IssuedGrant, error) {
	return s.Op(r, 0).IssueGrant(r.Context(), r.PathValue("name"), ng)
}

func (s *Server) listGrants(r *http.Request) (operator.GrantList, error) {
	gs, err := s.op.ListGrants(r.Context(), r.PathValue("name"))
	return operator.GrantList{Grants: gs}, err
}

// revokeGrant answers DELETE /api/grants/{id}: the grant is revoked (and
// kept, to be listed as revoked). Revoking a revoked grant keeps its
// first revocation time and answers 204 again.
func (s *Server) revokeGrant(r *http.Request) error {
	return s.Op(r, 0).RevokeGrant(r.Context(), r.PathValue("id"))
}
