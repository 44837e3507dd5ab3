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
		{Pattern: "GET /api/spool/dead", Handle: answer(http.StatusOK, listed("deadLetters", byOp(s, (*operator.Service).ListDeadLetters)))},
		{Pattern: "POST /api/spool/dead/{id}/retry", Handle: answer(http.StatusOK, byPath(s, "id", (*operator.Service).RetryDeadLetter))},
		{Pattern: "DELETE /api/spool/dead/{id}", Handle: s.removeBy("id", (*operator.Service).DropDeadLetter)},
	}
}
