package broker

import (
	"net/http"
	"net/netip"
	"strings"
)

// Source is the address r, a request to the broker's own listener, came
// from, as the broker judges a box's binding by it:
// SourceOf(r, TrustedProxies). (A request another front door hands in
// carries its source in its Handoff.)
func (s *Server) Source(r *http.Request) netip.Addr {
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
