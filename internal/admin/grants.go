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
