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
		{Pattern: "GET /api/proposals", Handle: answer(http.StatusOK, s.listProposals)},
		{Pattern: "GET /api/proposals/{id}", Handle: answer(http.StatusOK, byPath(s, "id", (*operator.Service).Proposal))},
		{Pattern: "POST /api/proposals/{id}/approve", Handle: s.approveProposal},
		{Pattern: "POST /api/proposals/{id}/deny", Handle: answer(http.StatusOK, byPath(s, "id", (*operator.Service).DenyProposal))},
		{Pattern: "GET /api/boxes/{name}/asks", Handle: answer(http.StatusOK, s.listAsks)},
		{Pattern: "PUT /api/boxes/{name}/asks/{scope}", Handle: answer(http.StatusOK, s.setAsk)},
		{Pattern: "DELETE /api/boxes/{name}/asks/{scope}", Handle: answer(http.StatusOK, s.setAsk)},
	}
}

func (s *Server) listProposals(r *http.Request) (operator.ProposalList, error) {
	list, err := s.op.ListProposals(r.Context(), r.URL.Query().Get("box"), r.URL.Query().Get("state"))
	return operator.ProposalList{Proposals: list}, err
}

func (s *Server) approveProposal(w http.ResponseWriter, r *http.Request) error {
	var d operator.Decision
	if r.ContentLength != 0 {
		if err := readJSON(w, r, &d); err != nil {
			return err
		}
	}
	p, err := s.Op(r, 0).ApproveProposal(r.Context(), r.PathValue("id"), d.For)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) listAsks(r *http.Request) (operator.AskList, error) {
	asks, err := s.op.Asks(r.Context(), r.PathValue("name"))
	return operator.AskList{Asks: asks}, err
}

// setAsk puts a box's scope in ask mode (PUT) or takes it out (DELETE).
func (s *Server) setAsk(r *http.Request) (operator.AskList, error) {
	asks, err := s.Op(r, 0).SetAsk(r.Context(), r.PathValue("name"), r.PathValue("scope"), r.Method == http.MethodPut)
	return operator.AskList{Asks: asks}, err
}
