package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// proposalRoutes are the admin API's routes of proposals and ask mode:
//
//	GET    /api/proposals?box=B&state=S       list them, newest first
//	GET    /api/proposals/{id}                one
//	POST   /api/proposals/{id}/approve        approve it; body {"for":"1h"}
//	POST   /api/proposals/{id}/deny           deny it
//	GET    /api/boxes/{name}/asks             the box's ask-mode scopes
//	PUT    /api/boxes/{name}/asks/{scope}     put a scope in ask mode
//	DELETE /api/boxes/{name}/asks/{scope}     take it out
func (s *Server) proposalRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/proposals", Handle: answer(http.StatusOK, listed("proposals", s.listProposals))},
		{Pattern: "GET /api/proposals/{id}", Handle: answer(http.StatusOK, byPath(s, "id", (*operator.Service).Proposal))},
		{Pattern: "POST /api/proposals/{id}/approve", Handle: decodeOptional(http.StatusOK, nil, s.approveProposal)},
		{Pattern: "POST /api/proposals/{id}/deny", Handle: answer(http.StatusOK, byPath(s, "id", (*operator.Service).DenyProposal))},
		{Pattern: "GET /api/boxes/{name}/asks", Handle: answer(http.StatusOK, listed("asks", byPath(s, "name", (*operator.Service).Asks)))},
		{Pattern: "PUT /api/boxes/{name}/asks/{scope}", Handle: answer(http.StatusOK, listed("asks", s.setAsk))},
		{Pattern: "DELETE /api/boxes/{name}/asks/{scope}", Handle: answer(http.StatusOK, listed("asks", s.setAsk))},
	}
}

func (s *Server) listProposals(r *http.Request) ([]operator.ProposalView, error) {
	return s.op.ListProposals(r.Context(), r.URL.Query().Get("box"), r.URL.Query().Get("state"))
}

func (s *Server) approveProposal(r *http.Request, d operator.Decision) (operator.ProposalView, error) {
	return s.Op(r).ApproveProposal(r.Context(), r.PathValue("id"), d.For)
}

// setAsk puts a box's scope in ask mode (PUT) or takes it out (DELETE).
func (s *Server) setAsk(r *http.Request) ([]string, error) {
	return s.Op(r).SetAsk(r.Context(), r.PathValue("name"), r.PathValue("scope"), r.Method == http.MethodPut)
}
