package egressproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/proxy"
)

// Public reports whether a is a public unicast address, the only kind a
// passthrough tunnel to a host approved as unknown goes to (the default
// Config.Reach): not loopback, link-local (the cloud metadata service at
// 169.254.169.254 and fd00:ec2::254 included), private (RFC 1918, IPv6
// unique local), shared (100.64.0.0/10), unspecified, multicast or
// reserved; an IPv4 address written in IPv6 (mapped, NAT64, 6to4) is
// judged as the IPv4 address it carries.
func Public(a netip.Addr) bool {
	a = proxy.Embedded(a.WithZone(""))
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// notPublic are the ranges netip's IsGlobalUnicast and IsPrivate leave
// in that no public host is reached at.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // this network
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier NAT, VPNs)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("2001::/32"),       // Teredo, whose IPv4 address is hidden
	netip.MustParsePrefix("100::/64"),        // discard
	netip.MustParsePrefix("fec0::/10"),       // site-local
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
}

// dialApproved connects a passthrough tunnel to to, a host approved as
// unknown: it looks up the host's addresses (an IP literal is its own)
// and, when every one is an address Reach allows, dials them in turn
// until one answers. Looking up and dialling here, rather than dialling
// the name, means the address judged is the address reached: a name the
// box controls cannot be approved as a public host and then answer with
// the broker's own loopback, its private network or the cloud metadata
// service. An address Reach refuses is a 403 (the address logged, not
// shown to the box); a name that
// does not resolve, or no address that answers, is a 502.
func (p *Proxy) dialApproved(ctx context.Context, to target) (net.Conn, error) {
	addrs, err := p.lookup(ctx, to.host)
	if err != nil || len(addrs) == 0 {
		p.log.Warn("proxy: look up an approved host", "addr", proxy.ScrubKept(to.addr()), "err", proxy.ScrubKept(fmt.Sprint(err)))
		return nil, capability.Refuse(capability.ReasonUpstreamFailed, "The approved host %s could not be looked up.", to.addr())
	}
	for _, a := range addrs {
		if !p.cfg.Reach(a) {
			// The address is logged, not shown: the box chose the name,
			// and would learn how the broker's own network resolves it.
			p.log.Warn("proxy: an approved host is at an address that is not public", "addr", proxy.ScrubKept(to.addr()), "at", a.String())
			return nil, capability.Refuse(capability.ReasonHost, "%s was approved as an unknown host, and it is at an address that is no public address: the broker's proxy tunnels to an approved host only at public addresses, never to its own loopback, a private network or a cloud's metadata service. Its operator lists a host to be reached elsewhere on --proxy-passthrough.",
				to.addr())
		}
	}
	var errs []error
	for _, a := range addrs {
		c, err := p.cfg.Dial(ctx, "tcp", net.JoinHostPort(a.String(), to.port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	p.log.Warn("proxy: approved host dial", "addr", proxy.ScrubKept(to.addr()), "err", proxy.ScrubKept(errors.Join(errs...).Error()))
	return nil, capability.Refuse(capability.ReasonUpstreamFailed, "%s", "The approved host "+to.addr()+" could not be reached.")
}

// lookup returns host's addresses: host itself when it is an IP literal,
// else what Config.Resolve finds.
func (p *Proxy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if strings.ContainsAny(host, "%:") {
		return nil, fmt.Errorf("not a host name")
	}
	return p.cfg.Resolve(ctx, host)
}
