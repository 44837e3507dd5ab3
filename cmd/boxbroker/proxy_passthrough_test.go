package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestServe_WarnsOfPassthroughToASecretsHost: serve names, as it starts,
// each passthrough entry that a secret is pinned to, with the box and
// secret, since the proxy refuses those boxes a tunnel there.
func TestServe_WarnsOfPassthroughToASecretsHost(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "longenoughvalue0123\n", "secret", "set", "shop", "PASS", "--host", "https://pass.example:8443"); code != 0 {
		t.Fatalf("secret set = %d %q", code, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServe(t, ctx, dir, map[string]string{"BOXBROKER_PROXY_PASSTHROUGH": "pass.example,free.example"},
		"--listen", "127.0.0.1:0", "--admin-listen", "off", "--proxy-listen", "127.0.0.1:0")
	const want = "warning: egress proxy passthrough pass.example:443 (shop/PASS)"
	tick := time.NewTicker(5 * time.Millisecond) // polls a condition; orders nothing
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.stderr.String(), want) && time.Now().Before(deadline); <-tick.C {
	}
	cancel()
	if code := s.wait(t); code != 0 {
		t.Fatalf("serve = %d", code)
	}
	errs := s.stderr.String()
	if !strings.Contains(errs, want) || strings.Contains(errs, "free.example:443 (") {
		t.Errorf("serve's stderr %q, want a warning for pass.example only", errs)
	}
}

// TestServe_ProxyLogsAsTheServerDoes: what the egress proxy logs (here a
// passthrough host it cannot dial) is written where and as the server's
// own lines are, JSON on stderr at --log-level, not through the standard
// library's default logger in its text form, which a log collector
// parsing JSON lines would drop.
func TestServe_ProxyLogsAsTheServerDoes(t *testing.T) {
	logs := serverLog(t)
	dir := t.TempDir()
	token, errs, code := run(t, dir, "", "box", "add", "shop")
	if code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	token = strings.TrimSpace(token)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := closed.Addr().String() // nothing listens there once closed
	closed.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startServe(t, ctx, dir, map[string]string{"BOXBROKER_PROXY_PASSTHROUGH": gone},
		"--listen", "127.0.0.1:0", "--admin-listen", "off", "--proxy-listen", "127.0.0.1:0")
	report := `{"capabilities":[{"name":"egress","broker":"lobby","scope":["GITHUB"]}]}`
	req, _ := http.NewRequest("POST", s.base+"/api/box/declaration", strings.NewReader(report))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("report = %v %v", resp, err)
	}
	resp.Body.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.proxy, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Bearer %s\r\n\r\n", gone, gone, token)
	answer, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || answer.StatusCode != http.StatusBadGateway {
		t.Fatalf("CONNECT %s = %v %v, want 502", gone, answer, err)
	}
	const want = "proxy: passthrough dial"
	tick := time.NewTicker(5 * time.Millisecond) // polls a condition; orders nothing
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), want) && time.Now().Before(deadline); <-tick.C {
	}
	cancel()
	s.wait(t)
	var lines []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, want) {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("the server's log %q, want a line saying %q", logs.String(), want)
	}
	for _, line := range lines {
		if !json.Valid([]byte(line)) {
			t.Errorf("proxy's log line %q, want a JSON line as the server's", line)
		}
	}
}

// serverLog catches what the server logs on os.Stderr (where serve's
// server logs) until the test ends. The package's tests run one at a
// time, so no other test's lines are caught.
func serverLog(t *testing.T) *brokertest.Buffer {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	was := os.Stderr
	os.Stderr = w
	logs := &brokertest.Buffer{}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(logs, r)
		close(copied)
	}()
	t.Cleanup(func() {
		os.Stderr = was
		w.Close()
		<-copied
		r.Close()
	})
	return logs
}
