package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// priceRoutes is the admin API's route of the price table:
//
//	GET /api/prices  the table the broker charges by (operator.PriceTable)
func (s *Server) priceRoutes() []Route {
	return []Route{{Pattern: "GET /api/prices", Handle: answer(http.StatusOK, byOp(s, (*operator.Service).Prices))}}
}
