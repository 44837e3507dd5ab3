package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxyca"
)

// ProxyCARotate is the body of POST /api/proxy/ca/rotate, which may be
// empty. Grace, a Go duration such as "168h" or "0s", is how long the
// current CA goes on signing, for boxes to come to trust the new one;
// "0s" switches at once. Absent or "": 168h.
type ProxyCARotate struct {
	Grace string `json:"grace,omitempty"`
}

// proxyCARoutes are the admin API's routes of the egress proxy's CA:
//
//	GET  /api/proxy/ca         the certificates a box trusts (operator.ProxyCAView)
//	POST /api/proxy/ca/rotate  a new CA, from a grace on (operator.ProxyCARotation)
//
// Neither answer ever holds the CA's key.
func (s *Server) proxyCARoutes() []Route {
	return []Route{
		{Pattern: "GET /api/proxy/ca", Handle: answer(http.StatusOK, func(r *http.Request) (operator.ProxyCAView, error) {
			return s.Op(r, 0).ProxyCA(r.Context())
		})},
		{Pattern: "POST /api/proxy/ca/rotate", Handle: s.rotateProxyCA},
	}
}

// rotateProxyCA answers POST /api/proxy/ca/rotate: its body, unlike
// decode's, may be empty.
func (s *Server) rotateProxyCA(w http.ResponseWriter, r *http.Request) error {
	var req ProxyCARotate
	if r.ContentLength != 0 {
		if err := readJSON(w, r, &req); err != nil {
			return err
		}
	}
	grace, ok := proxyca.ParseGrace(req.Grace)
	if !ok {
		return operator.Errorf(operator.Invalid, `The field "grace" is not a duration such as "168h" or "0s".`)
	}
	return answer(http.StatusOK, func(r *http.Request) (operator.ProxyCARotation, error) {
		return s.Op(r, 0).RotateProxyCA(r.Context(), grace)
	})(w, r)
}
