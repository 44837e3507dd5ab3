package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// PayerSetting is the body of PUT /api/boxes/{name}/payer
// (operator.PayerSetting).
type PayerSetting = operator.PayerSetting

// VisitorView is a visitor holding a credential (operator.VisitorView).
type VisitorView = operator.VisitorView

// VisitorList answers GET /api/visitors, by principal.
type VisitorList = operator.VisitorList

// setPayer answers PUT /api/boxes/{name}/payer through the operator
// service, as `boxbroker box payer` does.
func (s *Server) setPayer(w http.ResponseWriter, r *http.Request) error {
	var ps PayerSetting
	if err := readJSON(w, r, &ps); err != nil {
		return err
	}
	v, err := s.Op(r, 0).SetPayer(r.Context(), r.PathValue("name"), ps)
	ps.Value = ""
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) listVisitors(w http.ResponseWriter, r *http.Request) error {
	vs, err := s.op.ListVisitors(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, VisitorList{Visitors: vs})
}

func (s *Server) setVisitor(w http.ResponseWriter, r *http.Request) error {
	var cv CredentialValue
	if err := readJSON(w, r, &cv); err != nil {
		return err
	}
	v, err := s.Op(r, 0).SetVisitor(r.Context(), r.PathValue("principal"), cv.Kind, []byte(cv.Value))
	cv.Value = ""
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeVisitor(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveVisitor(r.Context(), r.PathValue("principal")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
