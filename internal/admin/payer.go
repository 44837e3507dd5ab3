package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// setPayer answers PUT /api/boxes/{name}/payer through the operator
// service, as `boxbroker box payer` does.
func (s *Server) setPayer(w http.ResponseWriter, r *http.Request) error {
	var ps operator.PayerSetting
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
	return writeJSON(w, http.StatusOK, operator.VisitorList{Visitors: vs})
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
