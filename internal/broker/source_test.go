package broker_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/intentius/boxbroker/internal/broker"
)

// TestSourceOf: X-Forwarded-For is believed only from a trusted proxy,
// and then its right-most address that is no trusted proxy's is the
// source; what an untrusted peer writes there is ignored.
func TestSourceOf(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"no proxy", "203.0.113.9:4000", nil, "203.0.113.9"},
		{"spoofed by an untrusted peer", "203.0.113.9:4000", []string{"198.51.100.7"}, "203.0.113.9"},
		{"trusted proxy", "10.1.2.3:4000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"client-written left part ignored", "10.1.2.3:4000", []string{"192.0.2.1, 198.51.100.7"}, "198.51.100.7"},
		{"two trusted hops", "10.1.2.3:4000", []string{"198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"several headers, in order", "10.1.2.3:4000", []string{"192.0.2.1", "198.51.100.7, 10.9.9.9"}, "198.51.100.7"},
		{"every address trusted", "10.1.2.3:4000", []string{"10.4.4.4, 10.9.9.9"}, "10.4.4.4"},
		{"trusted proxy, no header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"not an address", "10.1.2.3:4000", []string{"198.51.100.7, nonsense"}, "invalid IP"},
		{"IPv6 trusted proxy", "[::1]:4000", []string{"2001:db8::5"}, "2001:db8::5"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.9]:4000", nil, "203.0.113.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			r.Header = http.Header{"X-Forwarded-For": tt.xff}
			if got := broker.SourceOf(r, trusted).String(); got != tt.want {
				t.Errorf("SourceOf(%s, %q) = %s, want %s", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}
