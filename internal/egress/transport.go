package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"

	"github.com/intentius/boxbroker/internal/proxy"
)

// Errors of the outbound guard. The box sees the refusal the error
// handler maps them to, never their text.
var (
	// errElsewhere: a request or a connection for somewhere other than
	// the secret's host. Building the URL from the secret's base makes it
	// unreachable; the guard is the second lock.
	errElsewhere = errors.New("egress: outbound request is not for the secret's host")
	// errTokenLeft: the box's token is still in the outbound request in
	// a form the broker does not swap.
	errTokenLeft = errors.New("egress: the box's token is still in the outbound request")
)

// newTransport returns the transport egress uses when none is injected:
// proxy.NewTransport's, whose dialer connects only to the host:port of
// the secret the request is for.
func newTransport(o proxy.TransportOptions) *http.Transport {
	t := proxy.NewTransport(o)
	dial := t.DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !dialAllowed(ctx, addr) {
			return nil, errElsewhere
		}
		return dial(ctx, network, addr)
	}
	return t
}

// dialAllowed reports whether a connection to addr may be made for the
// request whose context is ctx: only to its secret's host and port.
func dialAllowed(ctx context.Context, addr string) bool {
	f := flightOf(ctx)
	return f != nil && addr == f.addr
}

// guard is the outermost RoundTripper: it sends a request on only when it
// is for the secret's scheme and host and holds no trace of the box's
// token, and it swaps the value out of informational (1xx) answers, which
// the reverse proxy passes to the box before ModifyResponse runs.
type guard struct{ next http.RoundTripper }

// RoundTrip checks req and sends it on.
func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	f := flightOf(req.Context())
	refuse := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if f == nil || req.URL.Scheme != f.target.Scheme || req.URL.Host != f.target.Host || req.Host != f.target.Host || req.URL.User != nil {
		return refuse(errElsewhere)
	}
	if carries(req, f.token) {
		return refuse(errTokenLeft)
	}
	if f.signErr != nil {
		return refuse(f.signErr)
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil && tr.Got1xxResponse != nil {
		next := tr.Got1xxResponse
		tr.Got1xxResponse = func(code int, h textproto.MIMEHeader) error {
			proxy.RedactHeader(http.Header(h), f.forms)
			return next(code, h)
		}
	}
	return g.next.RoundTrip(req)
}
