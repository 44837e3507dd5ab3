package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// setPayer answers PUT /api/boxes/{name}/payer through the operator
// service, as `boxbroker box payer` does.
func (s *Server) setPayer(r *http.Request, ps operator.PayerSetting) (operator.BoxView, error) {
	return s.Op(r, 0).SetPayer(r.Context(), r.PathValue("name"), ps)
}

func (s *Server) listVisitors(r *http.Request) (operator.VisitorList, error) {
	vs, err := s.op.ListVisitors(r.Context())
	return operator.VisitorList{Visitors: vs}, err
}

func (s *Server) setVisitor(r *http.Request, cv CredentialValue) (operator.VisitorView, error) {
	return s.Op(r, 0).SetVisitor(r.Context(), r.PathValue("principal"), cv.Kind, []byte(cv.Value))
}
