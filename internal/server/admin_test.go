package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

func TestConfig_AdminListen(t *testing.T) {
	tests := []struct {
		listen, admin string
		ok            bool
	}{
		{"127.0.0.1:8787", "", true}, // the default, 127.0.0.1:8788
		{"127.0.0.1:8787", "off", true},
		{"127.0.0.1:8787", "127.0.0.1:9000", true},
		{"127.0.0.1:0", "127.0.0.1:0", true},
		{"127.0.0.1:8787", "127.0.0.1:8787", false},
		{"0.0.0.0:8787", "127.0.0.1:8787", false},
		{"127.0.0.1:8787", ":8787", false},
		{"[::1]:8787", "[::]:8787", false},
		{"127.0.0.1:8787", "nonsense", false},
	}
	for _, tt := range tests {
		cfg := server.Config{Listen: tt.listen, AdminListen: tt.admin}
		cfg.Defaults()
		err := cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate(listen %q, admin-listen %q) = %v, want ok %v", tt.listen, tt.admin, err, tt.ok)
		}
	}
	cfg := server.Config{}
	cfg.Defaults()
	if cfg.AdminListen != server.DefaultAdminListen || !cfg.AdminEnabled() {
		t.Errorf("Defaults() AdminListen = %q, want %q, enabled", cfg.AdminListen, server.DefaultAdminListen)
	}
	cfg.AdminListen = "off"
	if cfg.AdminEnabled() {
		t.Errorf("AdminEnabled() with off = true, want false")
	}
}

// TestServe_TwoListeners serves the box-facing and admin handlers on their
// own loopback listeners: each answers only its own routes.
func TestConfig_AdminHosts(t *testing.T) {
	tests := []struct {
		hosts []string
		ok    bool
	}{
		{nil, true},
		{[]string{"broker.example.com"}, true},
		{[]string{"Broker.Example.COM.", "admin", "10.0.0.5", "::1"}, true},
		{[]string{"broker.example.com:8788"}, false},
		{[]string{"https://broker.example.com"}, false},
		{[]string{"*.example.com"}, false},
		{[]string{"broker..example.com"}, false},
		{[]string{"-broker.example.com"}, false},
		{[]string{"broker example"}, false},
		{[]string{""}, false},
	}
	for _, tt := range tests {
		cfg := server.Config{AdminHosts: tt.hosts}
		cfg.Defaults()
		err := cfg.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("Validate(admin-hosts %q) = %v, want ok %v", tt.hosts, err, tt.ok)
		}
	}
}

func TestServe_TwoListeners(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.New(ctx, server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", ShutdownGrace: time.Second},
		server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	box, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, box, adm) }()

	get := func(addr net.Addr, path string) int {
		t.Helper()
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tests := []struct {
		name string
		addr net.Addr
		path string
		want int
	}{
		{"admin healthz", adm.Addr(), "/healthz", 200},
		{"admin readyz", adm.Addr(), "/readyz", 200},
		{"admin API needs a token", adm.Addr(), "/api/boxes", 401},
		{"no healthz on the box side", box.Addr(), "/healthz", 404},
		{"no admin API on the box side", box.Addr(), "/api/boxes", 404},
		{"box side hello", box.Addr(), "/llm/anthropic/api/hello", 200},
		{"no box routes on the admin side", adm.Addr(), "/llm/anthropic/api/hello", 404},
	}
	for _, tt := range tests {
		if got := get(tt.addr, tt.path); got != tt.want {
			t.Errorf("%s: GET %s = %d, want %d", tt.name, tt.path, got, tt.want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
}

// TestAdmin_RebindHostIsRefused asks the admin listener for every kind of
// route as a page whose name was rebound to the broker's address would,
// its own name in Host: each is refused, and nothing of the broker is in
// the answer. Loopback, IP addresses and the configured names are served.
func TestAdmin_RebindHostIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.AdminHosts = []string{"broker.example.com"}
		c.AdminListen = "admin.internal:0" // its host is one of the names too
	}})
	b.AddBox("rebound-box")
	port := b.AdminURL[strings.LastIndex(b.AdminURL, ":")+1:]
	do := func(host, method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, b.AdminURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+b.AdminToken)
		resp, err := b.Client.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, host, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	routes := []struct{ method, path string }{
		{"GET", "/metrics"}, {"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/api/boxes"},
		{"GET", "/api/boxes/rebound-box"}, {"GET", "/ui/"}, {"GET", "/ui/signin"}, {"POST", "/ui/signin"}, {"GET", "/nowhere"},
	}
	refused := []string{"rebind.attacker.example", "rebind.attacker.example:" + port, "REBIND.attacker.example:8788",
		"broker.example.com.attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io:" + port, "attacker.example:80:80"}
	for _, host := range refused {
		for _, rt := range routes {
			status, body := do(host, rt.method, rt.path)
			var ref struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if status != http.StatusMisdirectedRequest || json.Unmarshal([]byte(body), &ref) != nil || ref.Type != "error" || ref.Error.Type != protocol.TypePermission {
				t.Errorf("%s %s with Host %s = %d %.200s, want a 421 refusal", rt.method, rt.path, host, status, body)
			}
			if strings.Contains(body, "rebound-box") || strings.Contains(body, "boxbroker_") {
				t.Errorf("%s %s with Host %s answered the broker's state: %.200s", rt.method, rt.path, host, body)
			}
		}
	}
	served := []string{"127.0.0.1:" + port, "127.0.0.1", "localhost", "localhost:" + port, "LOCALHOST.", "[::1]:" + port, "[::1]",
		"10.0.0.5:8788", "broker.example.com", "Broker.Example.com:" + port, "broker.example.com.:8788", "admin.internal:8788"}
	for _, host := range served {
		for _, rt := range []struct{ method, path string }{{"GET", "/healthz"}, {"GET", "/metrics"}, {"GET", "/api/boxes"}} {
			if status, body := do(host, rt.method, rt.path); status != http.StatusOK {
				t.Errorf("%s %s with Host %s = %d %.200s, want 200", rt.method, rt.path, host, status, body)
			}
		}
	}
}
