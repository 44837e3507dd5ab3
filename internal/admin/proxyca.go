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
		{Pattern: "GET /api/proxy/ca", Handle: answer(http.StatusOK, byOp(s, (*operator.Service).ProxyCA))},
		{Pattern: "POST /api/proxy/ca/rotate", Handle: decodeOptional(http.StatusOK, nil, s.rotateProxyCA)},
	}
}

func (s *Server) rotateProxyCA(r *http.Request, req ProxyCARotate) (operator.ProxyCARotation, error) {
	grace, ok := proxyca.ParseGrace(req.Grace)
	if !ok {
		return operator.ProxyCARotation{}, operator.Errorf(operator.Invalid, `The field "grace" is not a duration such as "168h" or "0s".`)
	}
	return s.Op(r).RotateProxyCA(r.Context(), grace)
}
