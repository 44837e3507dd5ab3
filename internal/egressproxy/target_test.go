package egressproxy

import "testing"

// TestPinnedTo: a secret's host is pinned to a CONNECT's or a plain
// request's target only by its exact scheme, host (either case, an IPv6
// literal in brackets or not) and port, a port left out being the
// scheme's default; the request's Host is judged against the target
// the same way (sameHost).
func TestPinnedTo(t *testing.T) {
	https := func(host, port string) target { return target{scheme: "https", host: host, port: port} }
	tests := []struct {
		base string
		to   target
		want bool
	}{
		{"https://api.github.com", https("api.github.com", "443"), true},
		{"https://API.GitHub.com/v3", https("api.github.com", "443"), true},
		{"https://api.github.com:443", https("api.github.com", "443"), true},
		{"https://api.github.com:8443", https("api.github.com", "8443"), true},
		{"https://api.github.com", https("api.github.com", "8443"), false},
		{"https://api.github.com:8443", https("api.github.com", "443"), false},
		{"http://api.github.com", https("api.github.com", "443"), false},
		{"http://api.github.com", target{scheme: "http", host: "api.github.com", port: "80"}, true},
		{"http://api.github.com:443", target{scheme: "http", host: "api.github.com", port: "80"}, false},
		{"https://[::1]", https("::1", "443"), true},
		{"https://[::1]:8443", https("::1", "8443"), true},
		{"https://[::1]:8443", https("::1", "443"), false},
		{"https://api.github.com.evil.example", https("api.github.com", "443"), false},
		{"not a url", https("api.github.com", "443"), false},
	}
	for _, tt := range tests {
		if got := pinnedTo(tt.base, tt.to); got != tt.want {
			t.Errorf("pinnedTo(%q, %+v) = %v, want %v", tt.base, tt.to, got, tt.want)
		}
	}
}
