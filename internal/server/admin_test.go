package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

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
