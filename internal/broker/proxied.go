package broker

import (
	"context"
	"net/http"

	"github.com/intentius/boxbroker/internal/token"
)

// proxiedKey marks a request the HTTPS proxy (package egressproxy) hands
// the broker in process; its value is the token the box authenticated
// the proxy with. A context value never comes from the network.
type proxiedKey struct{}

// ProxiedRoutePrefix begins the route label of a request served through
// the HTTPS proxy ("proxy /egress/*"), so that logs, metrics, the audit
// log and the owner's page show it as proxied.
const ProxiedRoutePrefix = "proxy "

// WithProxied returns ctx marking its request as one the HTTPS proxy
// serves for the box whose token is tok (from its Proxy-Authorization).
// The broker then authenticates the request by tok: a token the request
// carries itself must be the same one (two different ones are refused
// as for any request), and a request that carries none is the box's all
// the same. Everything else (the rule, pause, the box's limits, the
// capability's own checks) applies unchanged.
func WithProxied(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, proxiedKey{}, tok)
}

// proxiedToken is the token WithProxied put in r's context, or "".
func proxiedToken(r *http.Request) string {
	tok, _ := r.Context().Value(proxiedKey{}).(string)
	return tok
}

// findTokens returns the tokens r carries on its route rt, with the
// proxy's token among them when r came through the HTTPS proxy.
func findTokens(r *http.Request, rt *route) []string {
	var found []string
	if rt.Tokens != nil {
		found = rt.Tokens(r)
	} else {
		found = token.AppendSent(nil, r.Header)
	}
	if pt := proxiedToken(r); pt != "" {
		found = append(found, pt)
	}
	return found
}

// Observe tells the broker's Observer (metrics and the audit log) of a
// request answered outside ServeHTTP: the HTTPS proxy's passthrough
// tunnels (its refusals are told by Refuse). A nil Observer makes it a
// no-op.
//
// Observe scrubs rec first, as every record the broker keeps is: its
// method is OtherMethod unless a route could serve it, and every token
// in its route, words, reason and message (a refusal quoting the Host a
// box sent, say) is replaced.
func (s *Server) Observe(rec *Record) {
	if s.cfg.Observer != nil {
		s.observe(rec)
	}
}

// Acquire admits one request of box under the broker's per-box rate and
// concurrency bounds (Limits), for the HTTPS proxy's passthrough tunnels,
// which the broker's handler never serves: a tunnel counts as one request
// for the rate, and as one in flight until release is called. A refusal
// is a 429 capability.Error, which Refuse answers with its Retry-After.
func (s *Server) Acquire(box string) (release func(), err error) {
	return s.limits.acquire(box)
}
