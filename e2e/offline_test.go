package e2e

import "testing"

// TestOffline: npm's ways of saying it could not reach its registry are
// read as a missing network (a skip, or a failure under
// BOXBROKER_REQUIRE_NETWORK=1); other failures are not.
func TestOffline(t *testing.T) {
	tests := []struct {
		out  string
		want bool
	}{
		{"npm error code ENOTFOUND\nnpm error network request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org", true},
		{"npm error code EAI_AGAIN", true},
		{"npm error code ECONNREFUSED", true},
		{"npm error code ETIMEDOUT", true},
		{"npm error code EUSAGE\nnpm error The `npm ci` command can only install with an existing package-lock.json", false},
		{"npm error code EINTEGRITY", false},
	}
	for _, tt := range tests {
		if got := offline([]byte(tt.out)); got != tt.want {
			t.Errorf("offline(%q) = %v, want %v", tt.out, got, tt.want)
		}
	}
}
