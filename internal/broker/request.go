package broker

import (
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// OtherMethod is the method the broker's records (its log lines and the
// audit log) give a request in a method no route serves: HTTP allows a
// method to be any token, a box's own token included, so a method other
// than capability.StandardMethods' and CONNECT (the HTTPS proxy's) is
// never kept as it was sent.
const OtherMethod = "OTHER"

// recordedMethod is method as the broker's records keep it.
func recordedMethod(method string) string {
	if capability.MethodOf(method) != 0 || method == http.MethodConnect {
		return method
	}
	return OtherMethod
}

// errNoRoute is allowMethod's error for a path that names no route.
var errNoRoute = errors.New("broker: the path names no route")

// allowMethod returns nil when r's method is one its route serves,
// errNoRoute when its path names no route of c, and otherwise the 405,
// whose Allow header lists the route's methods.
func allowMethod(r *http.Request, c capability.Capability) error {
	allowed := capability.StandardMethods
	if a, ok := c.(capability.Allower); ok {
		allowed = a.Allowed(r)
	}
	if allowed == 0 {
		return errNoRoute
	}
	if allowed.Has(r.Method) {
		return nil
	}
	e := capability.Errorf(http.StatusMethodNotAllowed, protocol.TypeInvalid,
		"This route takes %s; the request's method is none of them.", allowed.Allow())
	e.Header = http.Header{"Allow": {allowed.Allow()}}
	return e
}

// observe tells the Observer of rec, scrubbed (see Record.scrub).
func (s *Server) observe(rec *Record) {
	rec.scrub()
	s.cfg.Observer.Request(rec)
}

// scrub makes rec keep nothing a box sent that can hold a token: its
// method is OtherMethod unless a route could serve it, and every token,
// or what is left of one, in its route, box, capability, words, reason
// and message is replaced (proxy.ScrubKept). A refusal may quote what a
// box sent (a Host, a path, an id), and a box may send its token, or
// another's, anywhere.
func (rec *Record) scrub() {
	rec.Method = recordedMethod(rec.Method)
	rec.Route = proxy.ScrubKept(rec.Route)
	rec.Box = proxy.ScrubKept(rec.Box)
	rec.Capability = proxy.ScrubKept(rec.Capability)
	rec.Reason = proxy.ScrubKept(rec.Reason)
	rec.Message = proxy.ScrubKept(rec.Message)
	rec.Words = proxy.ScrubKeptAll(rec.Words)
}

// scrubDeclaration replaces every token, or what is left of one, in the
// strings of a report the broker keeps and shows (its scope words, its
// listing's title and line, its principals), as in every record: a box
// may report anything there.
func scrubDeclaration(d *protocol.Declaration) {
	for i := range d.Capabilities {
		d.Capabilities[i].Scope = proxy.ScrubKeptAll(d.Capabilities[i].Scope)
	}
	if l := d.Listing; l != nil {
		l.Title, l.Line = proxy.ScrubKept(l.Title), proxy.ScrubKept(l.Line)
	}
	if sp := d.Spend; sp != nil {
		for i := range sp.ByPrincipal {
			if p := sp.ByPrincipal[i].Principal; p != nil {
				kept := proxy.ScrubKept(*p)
				sp.ByPrincipal[i].Principal = &kept
			}
		}
	}
}
