package protocol

import (
	"strings"
	"testing"
)

func TestParseSecretHost(t *testing.T) {
	tests := []struct {
		in      string
		want    string // canonical form; "" for refused
		problem string // the refusal says this
	}{
		{"https://api.example.com", "https://api.example.com", ""},
		{"https://API.Example.com/", "https://api.example.com", ""},
		{"https://api.example.com:8443/v1/", "https://api.example.com:8443/v1", ""},
		{"http://127.0.0.1:9000/base", "http://127.0.0.1:9000/base", ""},
		{"https://[::1]:8443", "https://[::1]:8443", ""},
		{"https://api.example.com/a%20b", "https://api.example.com/a%20b", ""},
		{"HTTPS://api.example.com", "https://api.example.com", ""},
		{"ftp://api.example.com", "", "https://"},
		{"api.example.com", "", "https://"},
		{"https://", "", "no host"},
		{"https:api.example.com", "", "no host"},
		{"https://user:pass@api.example.com", "", "user or password"},
		{"https://api.example.com?x=1", "", "query"},
		{"https://api.example.com?", "", "query"},
		{"https://api.example.com#frag", "", "fragment"},
		{"https://api.example.com:0", "", "port"},
		{"https://api.example.com:99999", "", "port"},
		{"https://api.example.com:", "", "port"},
		{"https://api.example.com/a/../b", "", "plain path"},
		{"https://api.example.com/a/%2e%2e/b", "", "plain path"},
		{"https://api.example.com/a%2Fb", "", "plain path"},
		{"https://api.example.com//b", "", "plain path"},
		{"https://bücher.example", "", "punycode"},
		{"https://exa mple.com", "", "not a URL"},
	}
	for _, tt := range tests {
		u, err := ParseSecretHost(tt.in)
		switch {
		case tt.want != "" && err != nil:
			t.Errorf("ParseSecretHost(%q) error %v, want %s", tt.in, err, tt.want)
		case tt.want != "" && u.String() != tt.want:
			t.Errorf("ParseSecretHost(%q) = %s, want %s", tt.in, u, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("ParseSecretHost(%q) = %s, want an error saying %q", tt.in, u, tt.problem)
		case tt.want == "" && !strings.Contains(err.Error(), tt.problem):
			t.Errorf("ParseSecretHost(%q) error %q, want it to say %q", tt.in, err, tt.problem)
		}
	}
}
