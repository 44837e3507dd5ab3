package admin

import "net/http"

// priceRoutes is the admin API's route of the price table:
//
//	GET /api/prices  the table the broker charges by (operator.PriceTable)
func (s *Server) priceRoutes() []Route {
	return []Route{{Pattern: "GET /api/prices", Handle: s.prices}}
}

func (s *Server) prices(w http.ResponseWriter, r *http.Request) error {
	v, err := s.op.Prices(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}
