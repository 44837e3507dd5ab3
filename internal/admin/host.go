package admin

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/intentius/boxbroker/internal/protocol"
)

// HostName returns name as the admin listener compares it, lower case
// with no final dot, and whether it is a host name it can be reached by:
// dot-separated labels of letters, digits and hyphens, none empty, longer
// than 63 bytes or beginning or ending with a hyphen, at most 253 bytes
// in all, with no port; or an IP address.
func HostName(name string) (string, bool) {
	h := strings.TrimSuffix(strings.ToLower(name), ".")
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return h, true
	}
	if h == "" || len(h) > 253 {
		return h, false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return h, false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return h, false
			}
		}
	}
	return h, true
}

// hostAllowed reports whether host, a request's Host, names the admin
// listener: localhost, an IP address (a name that could be rebound to
// the broker's address is never one) or one of s's names, with any port
// or none. An empty Host (HTTP/1.0, which no browser speaks) is allowed.
func (s *Server) hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	h := host
	if name, _, err := net.SplitHostPort(host); err == nil {
		h = name
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if strings.HasPrefix(host, "[") { // brackets hold only an IPv6 address
		return false
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	return h == "localhost" || s.hosts[h]
}

// refuseHost answers a request whose Host names another host than the
// admin listener's: 421, and nothing of the broker.
func refuseHost(w http.ResponseWriter) {
	protocol.WriteRefusal(w, http.StatusMisdirectedRequest, protocol.TypePermission,
		"The admin listener answers only for localhost, IP addresses and the names given to `serve --admin-hosts` (BOXBROKER_ADMIN_HOSTS); this request's Host names another host.")
}
