package broker

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
)

// sourceKey marks the source address a request came from, as the HTTPS
// proxy (package egressproxy) judged it at CONNECT, for the requests of
// its tunnel it hands the broker in process. A context value never
// comes from the network.
type sourceKey struct{}

// WithSource returns ctx saying its request came from addr: the broker
// judges a box's binding (store.Box.From) by addr rather than by the
// request's own RemoteAddr and X-Forwarded-For. The HTTPS proxy marks
// each tunnel's requests so, and AdmitBox reads it.
func WithSource(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, sourceKey{}, addr)
}

// sourceFrom is the address WithSource put in ctx; the zero Addr (which
// no binding admits) when there is none.
func sourceFrom(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(sourceKey{}).(netip.Addr)
	return a
}

// Source is the address r came from, as the broker judges a box's
// binding by it: the one WithSource put in r's context, or else
// SourceOf(r, TrustedProxies).
func (s *Server) Source(r *http.Request) netip.Addr {
	if a, ok := r.Context().Value(sourceKey{}).(netip.Addr); ok {
		return a
	}
	return SourceOf(r, s.cfg.TrustedProxies)
}

// SourceOf is the address r came from: its peer (RemoteAddr), unless the
// peer is one of trusted, the front proxies whose X-Forwarded-For is
// believed. Then it is the right-most address of X-Forwarded-For (every
// such header, in order) that is not a trusted proxy's, walking left
// past each trusted one: each proxy appends the address it was reached
// from, so what lies left of the first untrusted one was written by
// whoever sent the request and proves nothing. When every address is a
// trusted proxy's it is the left-most; when there is no header, the
// peer. An entry that is no address gives the zero Addr, which no
// binding admits.
func SourceOf(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseAddr(r.RemoteAddr)
	if !peer.IsValid() || !inAny(peer, trusted) {
		return peer
	}
	values := r.Header.Values("X-Forwarded-For")
	last := peer
	for i := len(values) - 1; i >= 0; i-- {
		parts := strings.Split(values[i], ",")
		for j := len(parts) - 1; j >= 0; j-- {
			p := strings.TrimSpace(parts[j])
			if p == "" {
				continue
			}
			a := parseAddr(p)
			if !a.IsValid() || !inAny(a, trusted) {
				return a
			}
			last = a
		}
	}
	return last
}

// parseAddr reads an address, with a port or without (RemoteAddr has
// one; X-Forwarded-For entries mostly do not), IPv4-mapped IPv6 unmapped;
// the zero Addr when s is neither.
func parseAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func inAny(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
