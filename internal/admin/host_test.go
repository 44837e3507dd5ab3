package admin

import "testing"

func TestServer_HostAllowed(t *testing.T) {
	s := &Server{hosts: map[string]bool{"broker.example.com": true}}
	tests := []struct {
		host string
		want bool
	}{
		{"", true}, // HTTP/1.0 with no Host
		{"127.0.0.1", true},
		{"127.0.0.1:8788", true},
		{"127.1.2.3:8788", true},
		{"10.0.0.5:8788", true},
		{"[::1]:8788", true},
		{"[::1]", true},
		{"::1", true},
		{"localhost", true},
		{"LocalHost:8788", true},
		{"localhost.", true},
		{"broker.example.com", true},
		{"BROKER.example.com:443", true},
		{"broker.example.com.:8788", true},
		{"rebind.attacker.example", false},
		{"rebind.attacker.example:8788", false},
		{"broker.example.com.attacker.example", false},
		{"attacker.broker.example.com", false},
		{"localhost.attacker.example", false},
		{"127.0.0.1.nip.io", false},
		{"[broker.example.com]:8788", false},
		{"broker.example.com:8788:8788", false},
		{"0x7f000001", false},
		{"2130706433", false},
	}
	for _, tt := range tests {
		if got := s.hostAllowed(tt.host); got != tt.want {
			t.Errorf("hostAllowed(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

func TestHostName(t *testing.T) {
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"broker.example.com", "broker.example.com", true},
		{"Broker.Example.COM.", "broker.example.com", true},
		{"admin", "admin", true},
		{"10.0.0.5", "10.0.0.5", true},
		{"::1", "::1", true},
		{"broker.example.com:8788", "", false},
		{"*.example.com", "", false},
		{"a..b", "", false},
		{"-a.b", "", false},
		{"a-.b", "", false},
		{"a_b.example", "", false},
		{"", "", false},
		{".", "", false},
	}
	for _, tt := range tests {
		got, ok := HostName(tt.name)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("HostName(%q) = %q, %v, want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
