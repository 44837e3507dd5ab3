package broker

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// prefix is one route prefix, the capability that owns it, and the route
// label its requests are logged and counted under until their route is
// known.
type prefix struct {
	prefix string
	label  string
	c      capability.Capability
}

// route is one capability.Route the broker serves, with its capability
// and the label its requests are counted under.
type route struct {
	capability.Route
	label string
	c     capability.Capability
	// allow is Methods as an Allow header lists them, and probe the
	// first of them, made once.
	allow, probe string
}

// routes is the table of every capability's routes: a net/http ServeMux
// of their patterns, and the route each pattern is.
type routes struct {
	prefixes []prefix
	mux      *http.ServeMux
	byPat    map[string]*route
}

// newRoutes builds the table of caps' prefixes and routes, or returns
// every problem with them: a prefix that is not a path, covers the
// declaration route or is another's; a route outside its capability's
// prefixes, with no methods, or whose pattern the ServeMux refuses (a
// pattern of another route, or one that conflicts with it).
func newRoutes(caps []capability.Capability) (routes, []string) {
	t := routes{mux: http.NewServeMux(), byPat: map[string]*route{}}
	var problems []string
	seen := map[string]string{}
	for _, c := range caps {
		for _, p := range c.Prefixes() {
			if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
				problems = append(problems, fmt.Sprintf("capability %s: prefix %q must begin and not end with /", c.Name(), p))
			}
			if capability.Owns(p, protocol.RouteDeclaration) {
				problems = append(problems, fmt.Sprintf("capability %s: prefix %q covers the declaration route", c.Name(), p))
			}
			if other, dup := seen[p]; dup {
				problems = append(problems, fmt.Sprintf("prefix %q is served by both %s and %s", p, other, c.Name()))
			}
			seen[p] = c.Name()
			t.prefixes = append(t.prefixes, prefix{prefix: p, label: p + "/*", c: c})
		}
	}
	for _, c := range caps {
		for _, cr := range c.Routes() {
			if problem := t.add(c, cr); problem != "" {
				problems = append(problems, fmt.Sprintf("capability %s: route %q: %s", c.Name(), cr.Pattern, problem))
			}
		}
	}
	return t, problems
}

// add adds cr, a route of c, to t, or returns what is wrong with it.
func (t *routes) add(c capability.Capability, cr capability.Route) (problem string) {
	owned := false
	for _, p := range c.Prefixes() {
		owned = owned || capability.Owns(p, strings.TrimSuffix(cr.Pattern, "/"))
	}
	switch {
	case !strings.HasPrefix(cr.Pattern, "/"):
		return "a pattern is a path, with no method or host"
	case !owned:
		return "the pattern lies under none of the capability's prefixes"
	case cr.Methods == 0:
		return "the route names no method"
	}
	rt := &route{Route: cr, label: boundRoute(cr.Label), c: c, allow: cr.Methods.Allow()}
	rt.probe, _, _ = strings.Cut(rt.allow, ", ")
	if rt.label == "" {
		rt.label = boundRoute(cr.Pattern)
	}
	defer func() {
		// The ServeMux refuses a pattern it cannot tell from another
		// by panicking; a table is built once, at start.
		if v := recover(); v != nil {
			problem = fmt.Sprint(v)
		}
	}()
	t.mux.Handle(cr.Pattern, http.NotFoundHandler())
	t.byPat[cr.Pattern] = rt
	return ""
}

// found is what routes.find judged of a request from its head alone.
type found struct {
	// c is the capability whose prefix owns the path (nil for none), and
	// label the request's route label: its route's once c has accepted
	// the request, its prefix's until then.
	c     capability.Capability
	label string
	// rt is the request's route, need what it needs there (c's Scopes),
	// and coding its body's content coding ("" for a body as it is).
	rt     *route
	need   capability.Need
	coding string
}

// find judges r from its head alone, before the box is known, and goes
// no further, upstream or into a record, than its first refusal: the
// capability whose prefix owns r's path and the route of it whose pattern
// matches (a 404 for none), r's method on that route (allowMethod: a 405,
// or a 404), what r needs there (the capability's Scopes; a 404 for a
// path it does not serve) and the content coding of r's body (a 415 for
// one the route does not take, and for any on a public route, which
// reads no body). What it found is returned with its refusal too, for
// the request's record.
func (t *routes) find(r *http.Request) (f found, err error) {
	p := t.prefixOf(r.URL.Path)
	if p == nil {
		return f, capability.NotFound(r)
	}
	f.c, f.label = p.c, p.label
	rt := t.routeOf(r, p.c)
	if rt == nil {
		return f, capability.NotFound(r)
	}
	if err := rt.allowMethod(r); err != nil {
		return f, err
	}
	need, ok, err := p.c.Scopes(r)
	if err != nil {
		return f, err
	}
	if !ok {
		return f, capability.NotFound(r)
	}
	f.rt, f.label, f.need = rt, rt.label, need
	if f.coding, err = rt.bodyCoding(r); err == nil && need.Public && f.coding != "" {
		err = unreadableBody(nil)
	}
	return f, err
}

// prefixOf finds the prefix owning path, or nil.
func (t *routes) prefixOf(path string) *prefix {
	for i := range t.prefixes {
		if capability.Owns(t.prefixes[i].prefix, path) {
			return &t.prefixes[i]
		}
	}
	return nil
}

// routeOf finds the route of c whose pattern matches r's decoded path as
// it is (no cleaning, no redirect), or nil.
func (t *routes) routeOf(r *http.Request, c capability.Capability) *route {
	// The ServeMux is asked as for a CONNECT, which it matches with
	// no path cleaning; the patterns name no method, so it matches
	// every method alike, and the route's own Methods judge r's.
	// A path with escapes its decoded form does not restore (an escaped
	// slash) is matched decoded, as the capabilities judge it; any other
	// URL is matched as it is, with nothing made for it.
	u := r.URL
	if u.RawPath != "" {
		u = &url.URL{Path: r.URL.Path}
	}
	q := http.Request{Method: http.MethodConnect, URL: u}
	_, pat := t.mux.Handler(&q)
	rt := t.byPat[pat]
	if rt == nil || rt.c != c {
		return nil
	}
	return rt
}

// allowMethod returns nil when r's method is one rt serves; otherwise
// the 404 when rt's capability serves r's path in none of rt's methods
// (servesPath), and the 405, whose Allow header lists rt's methods, when
// it does.
func (rt *route) allowMethod(r *http.Request) error {
	if rt.Methods.Has(r.Method) {
		return nil
	}
	if !rt.servesPath(r) {
		return capability.NotFound(r)
	}
	e := capability.Refuse(capability.ReasonMethod,
		"This route takes %s; the request's method is none of them.", rt.allow)
	e.Header = http.Header{"Allow": {rt.allow}}
	return e
}

// servesPath reports whether rt's capability serves r's path in the
// first of rt's methods, asking its Scopes of a copy of r's head in that
// method with no body. A pattern is coarser than a capability's judgment
// of a path (egress's secret name, fountain's segments): a path the
// pattern matches but the capability does not serve is a 404 in every
// method, as Scopes makes it in the route's own, never a 405. Only a
// request refused for its method pays for the copy.
func (rt *route) servesPath(r *http.Request) bool {
	probe := *r
	probe.Method, probe.Body, probe.ContentLength = rt.probe, http.NoBody, 0
	_, ok, err := rt.c.Scopes(&probe)
	return ok || err != nil
}

// bodyCoding judges the content coding of r's body on rt: it returns ""
// for a body as it is (or no body), the coding when rt's Codings name it
// (its CodedLimit is then the most bytes the body may take), and
// otherwise a 415. The header is judged whole, as an answer's is: more
// than one Content-Encoding header, or stacked codings, are a 415 too.
func (rt *route) bodyCoding(r *http.Request) (string, error) {
	values := r.Header.Values("Content-Encoding")
	if len(values) == 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return "", nil
	}
	coding, err := proxy.Decoding(values, rt.Codings...)
	if err != nil {
		return "", unreadableBody(rt.Codings)
	}
	return coding, nil
}

// unreadableBody is the 415 of a request body in a content coding the
// route does not take; codings are those it takes.
func unreadableBody(codings []string) error {
	msg := "This route takes a request body only as it is, with no Content-Encoding: the broker reads every body to keep tokens out of what goes upstream, and cannot read it encoded. Send it uncompressed."
	if len(codings) > 0 {
		msg = "This route takes a request body as it is or in gzip (one Content-Encoding: gzip), which the broker decodes to keep tokens out of what goes upstream; it cannot read this one's encoding. Send it uncompressed or in gzip."
	}
	return capability.Refuse(capability.ReasonEncoding, "%s", msg)
}

// boundRoute keeps a capability's route template to a sane length.
func boundRoute(route string) string {
	if len(route) > 120 {
		return route[:120]
	}
	return route
}

// Classify finds the capability whose prefix owns r's path (nil for none)
// and what r needs of it, the words its route's BodyScopes reads from the
// body included; ok is false for a path no capability serves. It authenticates
// nothing: ServeHTTP reads a body only once the token is a box's.
func (s *Server) Classify(r *http.Request) (c capability.Capability, need capability.Need, ok bool, err error) {
	p := s.routes.prefixOf(r.URL.Path)
	if p == nil {
		return nil, need, false, nil
	}
	need, ok, err = p.c.Scopes(r)
	if rt := s.routes.routeOf(r, p.c); rt != nil && rt.BodyScopes != nil && ok && err == nil && !need.Public {
		need.Words, err = rt.BodyScopes(r)
	}
	return p.c, need, ok, err
}

// routeUnmatched labels a path no capability's prefix owns.
const routeUnmatched = "{unmatched}"
