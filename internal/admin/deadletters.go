package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// deadLetterRoutes are the admin API's routes of this replica's dead
// letters (Config.DeadLetters):
//
//	GET    /api/spool/dead             list them, oldest first
//	POST   /api/spool/dead/{id}/retry  apply one to the store now; removed once taken
//	DELETE /api/spool/dead/{id}        drop one, giving up its records
func (s *Server) deadLetterRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/spool/dead", Handle: s.listDeadLetters},
		{Pattern: "POST /api/spool/dead/{id}/retry", Handle: s.retryDeadLetter},
		{Pattern: "DELETE /api/spool/dead/{id}", Handle: s.dropDeadLetter},
	}
}

func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) error {
	list, err := s.op.ListDeadLetters(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, operator.DeadLetterList{DeadLetters: list})
}

func (s *Server) retryDeadLetter(w http.ResponseWriter, r *http.Request) error {
	v, err := s.Op(r, 0).RetryDeadLetter(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) dropDeadLetter(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).DropDeadLetter(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
