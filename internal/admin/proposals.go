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
		{Pattern: "GET /api/proposals", Handle: s.listProposals},
		{Pattern: "GET /api/proposals/{id}", Handle: s.getProposal},
		{Pattern: "POST /api/proposals/{id}/approve", Handle: s.approveProposal},
		{Pattern: "POST /api/proposals/{id}/deny", Handle: s.denyProposal},
		{Pattern: "GET /api/boxes/{name}/asks", Handle: s.listAsks},
		{Pattern: "PUT /api/boxes/{name}/asks/{scope}", Handle: s.setAsk},
		{Pattern: "DELETE /api/boxes/{name}/asks/{scope}", Handle: s.setAsk},
	}
}

func (s *Server) listProposals(w http.ResponseWriter, r *http.Request) error {
	list, err := s.op.ListProposals(r.Context(), r.URL.Query().Get("box"), r.URL.Query().Get("state"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, operator.ProposalList{Proposals: list})
}

func (s *Server) getProposal(w http.ResponseWriter, r *http.Request) error {
	p, err := s.op.Proposal(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
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

func (s *Server) denyProposal(w http.ResponseWriter, r *http.Request) error {
	p, err := s.Op(r, 0).DenyProposal(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (s *Server) listAsks(w http.ResponseWriter, r *http.Request) error {
	asks, err := s.op.Asks(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, operator.AskList{Asks: asks})
}

// setAsk puts a box's scope in ask mode (PUT) or takes it out (DELETE).
func (s *Server) setAsk(w http.ResponseWriter, r *http.Request) error {
	asks, err := s.Op(r, 0).SetAsk(r.Context(), r.PathValue("name"), r.PathValue("scope"), r.Method == http.MethodPut)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, operator.AskList{Asks: asks})
}
