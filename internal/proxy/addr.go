package proxy

import (
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Embedded is the IPv4 address a carries when it writes one in IPv6
// (IPv4-mapped, the well-known NAT64 prefix 64:ff9b::/96, or 6to4's
// 2002::/16), and a otherwise: what a connection to a reaches, as far
// as judging it goes.
func Embedded(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16]))
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6]))
	}
	return a
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Reachable reports whether a host named host (a secret's, or a token
// endpoint's) may be reached at a. A host written as an IP address is
// reached at it, whatever it is: the operator named it. A name is
// answered for by whoever keeps its
// DNS, which may be someone else than the operator, and may answer
// otherwise at each lookup (DNS rebinding): it is never reached at an
// unspecified address (0.0.0.0, which reaches this machine), link-local
// (169.254.0.0/16, the cloud metadata service at 169.254.169.254
// included, and fe80::/10), or a cloud's metadata service elsewhere
// (fd00:ec2::254, 100.100.100.200); nor at loopback, unless it is
// localhost (or a name under .localhost), which names loopback itself.
// An IPv4 address written in IPv6 (mapped, NAT64, 6to4) is judged as the
// IPv4 address it carries. A private network's address is reached by
// name: an operator's own hosts are named so.
func Reachable(host string, a netip.Addr) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	a = Embedded(a.WithZone(""))
	switch {
	case a.IsUnspecified() || thisNetwork.Contains(a) || a.IsLinkLocalUnicast() || slices.Contains(metadata, a):
		return false
	case a.IsLoopback():
		h := strings.TrimSuffix(strings.ToLower(host), ".")
		return h == "localhost" || strings.HasSuffix(h, ".localhost")
	}
	return true
}

// ReachableAt is Reachable for address, the "ip:port" a dialer is about
// to connect to (a net.Dialer's ControlContext is given it): a, the
// address's IP (invalid for an address that is none), and whether host
// may be reached at it.
func ReachableAt(host, address string) (a netip.Addr, ok bool) {
	ip, _, err := net.SplitHostPort(address)
	if err != nil {
		return netip.Addr{}, false
	}
	if a, err = netip.ParseAddr(ip); err != nil {
		return netip.Addr{}, false
	}
	return a, Reachable(host, a)
}

var (
	// thisNetwork is 0.0.0.0/8, "this network" (RFC 791), which Linux
	// connects to as this machine.
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	// metadata are the cloud metadata services outside link-local:
	// AWS's over IPv6 and Alibaba Cloud's.
	metadata = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}
)
