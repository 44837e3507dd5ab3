package proxy

import "net/netip"

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
