package broker

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
)

// route is one prefix, the capability that owns it, and the route label
// its requests are logged and counted under.
type route struct {
	prefix string
	label  string
	c      capability.Capability
}

// route finds the capability owning path, or nil.
func (s *Server) route(path string) *route {
	for i := range s.routes {
		if capability.Owns(s.routes[i].prefix, path) {
			return &s.routes[i]
		}
	}
	return nil
}

// boundRoute keeps a capability's route template to a sane length.
func boundRoute(route string) string {
	if len(route) > 120 {
		return route[:120]
	}
	return route
}

// Classify finds the capability whose prefix owns r's path (nil for none)
// and what r needs of it, the words a BodyScoper reads from the body
// included; ok is false for a path no capability serves. It authenticates
// nothing: ServeHTTP reads a body only once the token is a box's.
func (s *Server) Classify(r *http.Request) (c capability.Capability, need capability.Need, ok bool, err error) {
	rt, need, ok, err := s.classify(r)
	if rt == nil {
		return nil, need, ok, err
	}
	if bs, isBody := rt.c.(capability.BodyScoper); isBody && ok && err == nil && !need.Public {
		need.Words, err = bs.BodyScopes(r)
	}
	return rt.c, need, ok, err
}

func (s *Server) classify(r *http.Request) (rt *route, need capability.Need, ok bool, err error) {
	rt = s.route(r.URL.Path)
	if rt == nil {
		return nil, need, false, nil
	}
	need, ok, err = rt.c.Scopes(r)
	return rt, need, ok, err
}

// routeUnmatched labels a path no capability's prefix owns.
const routeUnmatched = "{unmatched}"
