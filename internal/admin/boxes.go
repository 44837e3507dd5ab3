package admin

import (
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// Op is the operator service acting for r: its audit rows name r's
// method and route pattern, with each action's own status, and the
// admin token r was authenticated with (" (by admin token ID)"), and a
// decision it makes on a proposal names that token, "admin:" and its
// ID, as the one who decided: an action can be traced to the token to
// revoke.
func (s *Server) Op(r *http.Request) *operator.Service {
	_, route, _ := strings.Cut(r.Pattern, " ")
	o := operator.Origin{Method: r.Method, Route: route}
	if c, ok := r.Context().Value(adminTokenKey{}).(caller); ok {
		o.Decider, o.By = "admin:"+c.id, " (by admin token "+c.id+")"
		o.ReadOnly = !c.role.CanWrite()
	}
	return s.op.Via(o)
}

// Operator is the operator service the Server is an adapter over.
func (s *Server) Operator() *operator.Service { return s.op }

// BoxName reads and checks the {name} path value.
func BoxName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	return name, operator.CheckBoxName(name)
}

// published reports whether v's last report listed it as published.
func published(v operator.BoxView) bool { return v.Listing != nil && v.Listing.Published }

// Box reads the box named in r's {name} path value, or refuses with a
// 400 (not a box name) or a 404 (no such box).
func (s *Server) Box(r *http.Request) (store.Box, error) {
	return s.op.StoredBox(r.Context(), r.PathValue("name"))
}

// boxExists refuses r unless its {name} is a box's (Box), as a check
// for decode.
func (s *Server) boxExists(r *http.Request) error {
	_, err := s.Box(r)
	return err
}

// boxNamed refuses r unless its {name} is a box name (BoxName), as a
// check for decode.
func boxNamed(r *http.Request) error {
	_, err := BoxName(r)
	return err
}

func (s *Server) addBox(r *http.Request, nb operator.NewBox) (operator.BoxToken, error) {
	return s.Op(r).AddBox(r.Context(), nb)
}
