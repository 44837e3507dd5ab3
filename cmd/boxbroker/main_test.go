package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// run runs the CLI in-process with stdin and BOXBROKER_DATA=dir.
func run(t *testing.T, dir, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(k string) string {
		if k == "BOXBROKER_DATA" {
			return dir
		}
		return ""
	}}
	code = c.main(context.Background(), args)
	return out.String(), errb.String(), code
}

func TestCLI_BoxesAndCredentials(t *testing.T) {
	dir := t.TempDir()
	token, _, code := run(t, dir, "", "box", "add", "salad")
	token = strings.TrimSpace(token)
	if code != 0 || !strings.HasPrefix(token, "bbx_") {
		t.Fatalf("box add = %q, %d", token, code)
	}
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 1 || !strings.Contains(errs, "already exists") {
		t.Errorf("second box add = %d %q", code, errs)
	}
	if _, errs, code := run(t, dir, "", "box", "add", "Bad_Name"); code != 2 || !strings.Contains(errs, "must match") {
		t.Errorf("bad name = %d %q", code, errs)
	}
	const key = "sk-ant-api03-CLITESTKEY"
	out, errs, code := run(t, dir, key+"\n", "credential", "set", "anthropic")
	if code != 0 || strings.Contains(out+errs, key) {
		t.Errorf("credential set = %d %q %q", code, out, errs)
	}
	if _, errs, code := run(t, dir, "", "credential", "set", "anthropic"); code != 1 || !strings.Contains(errs, "no value on stdin") {
		t.Errorf("empty credential = %d %q", code, errs)
	}
	if _, _, code := run(t, dir, "", "credential", "set", "anthropic", "sk-in-argv"); code != 2 {
		t.Errorf("credential in argv accepted: %d", code)
	}
	out, _, _ = run(t, dir, "", "credential", "list")
	if !strings.Contains(out, "anthropic") || strings.Contains(out, key) {
		t.Errorf("credential list = %q", out)
	}
	out, _, _ = run(t, dir, "", "box", "list")
	if !strings.Contains(out, "salad") || strings.Contains(out, token) {
		t.Errorf("box list = %q", out)
	}
	rotated, _, code := run(t, dir, "", "box", "rotate", "salad")
	if code != 0 || strings.TrimSpace(rotated) == token {
		t.Errorf("box rotate = %q, %d", rotated, code)
	}
	if _, _, code := run(t, dir, "n\n", "box", "remove", "salad"); code != 1 {
		t.Errorf("box remove answered no = %d", code)
	}
	if _, _, code := run(t, dir, "", "box", "remove", "--yes", "salad"); code != 0 {
		t.Errorf("box remove --yes = %d", code)
	}
	if _, errs, code := run(t, dir, "", "box", "rotate", "salad"); code != 1 || !strings.Contains(errs, "no box named salad") || !strings.Contains(errs, "`boxbroker box list`") {
		t.Errorf("rotate removed box = %d %q", code, errs)
	}
}

// TestCLI_QuickStart follows the README's quick start against a stand-in
// Anthropic API, and shows a stream in flight finishes after SIGINT.
func TestCLI_QuickStart(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "sk-ant-api03-QUICKSTART" {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := brokertest.SSEEvents("m", "hi")
		io.WriteString(w, ev[0])
		w.(http.Flusher).Flush()
		<-release
		for _, e := range ev[1:] {
			io.WriteString(w, e)
		}
	}))
	defer up.Close()
	dir := t.TempDir()
	token, _, _ := run(t, dir, "", "box", "add", "salad")
	token = strings.TrimSpace(token)
	run(t, dir, "sk-ant-api03-QUICKSTART", "credential", "set", "anthropic")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := startServe(t, ctx, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--anthropic-url", up.URL, "--shutdown-grace", "5s")
	base := srv.base
	for _, want := range []string{"data: " + dir, "store: SQLite, " + filepath.Join(dir, "boxbroker.db"), "anthropic upstream: " + up.URL, "broker word: lobby", "admin API, metrics and owner's page on http://127.0.0.1:"} {
		if !strings.Contains(srv.out, want) {
			t.Errorf("serve did not say %q; it printed:\n%s", want, srv.out)
		}
	}
	if !strings.Contains(srv.out, "owner's page: http://127.0.0.1:") || !strings.Contains(srv.out, "/ui/\n") {
		t.Errorf("serve did not print the owner's page's URL; it printed:\n%s", srv.out)
	}
	req, _ := http.NewRequest("POST", base+"/api/box/declaration", strings.NewReader(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("report: %v %v", resp, err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("POST", base+"/llm/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("messages: %v %v", resp, err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != "event: message_start\n" {
		t.Fatalf("first line %q", line)
	}
	cancel() // SIGINT: stop taking requests, let the stream finish
	srv.waitRefusing(t)
	close(release)
	rest, err := io.ReadAll(rd)
	if err != nil || !strings.Contains(string(rest), "message_stop") {
		t.Errorf("stream after shutdown began: %q, %v", rest, err)
	}
	if code := srv.wait(t); code != 0 {
		t.Errorf("serve exited %d; its stderr:\n%s", code, srv.stderr.String())
	}
}

// served is a `serve` running in-process, started by startServe.
type served struct {
	base   string             // the box-facing URL it printed
	admin  string             // the admin listener's URL it printed; "" for none
	proxy  string             // the egress proxy's URL it printed, with --proxy-listen
	out    string             // what it printed on stdout before serving
	stderr *brokertest.Buffer // its stderr, shown when the test fails
	done   chan int           // its exit status
}

// startServe runs `serve args...` in-process on the data directory dir
// (with env's variables besides) until ctx ends, and returns once it has
// printed where it listens and what it uses: no sleep, the lines are the
// signal. Its stderr is shown if the test fails.
func startServe(t *testing.T, ctx context.Context, dir string, env map[string]string, args ...string) *served {
	t.Helper()
	return startServeAgain(t, ctx, nil, dir, env, args...)
}

// startServeAgain is startServe with again as the second signal's
// context (cli.again): ending ctx is the first SIGINT, ending again the
// second.
func startServeAgain(t *testing.T, ctx, again context.Context, dir string, env map[string]string, args ...string) *served {
	t.Helper()
	pr, pw := io.Pipe()
	s := &served{stderr: &brokertest.Buffer{}, done: make(chan int, 1)}
	vars := map[string]string{"BOXBROKER_DATA": dir, "BOXBROKER_LOG_LEVEL": "warn"}
	for k, v := range env {
		vars[k] = v
	}
	c := &cli{stdin: strings.NewReader(""), stdout: pw, stderr: s.stderr, getenv: func(k string) string { return vars[k] }, again: again}
	go func() {
		code := c.main(ctx, append([]string{"serve"}, args...))
		pw.Close()
		s.done <- code
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", s.stderr.String())
		}
	})
	sc := bufio.NewScanner(pr)
	var out strings.Builder
	data := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			s.base = strings.TrimSpace(rest)
		}
		if _, rest, ok := strings.Cut(line, "owner's page on "); ok {
			s.admin = strings.TrimSpace(rest)
		}
		if _, rest, ok := strings.Cut(line, "egress proxy on "); ok {
			s.proxy, _, _ = strings.Cut(rest, " ")
		}
		if strings.HasPrefix(line, "data: ") { // the last line before it serves, but the proxy's
			data = true
		}
		if data && (s.proxy != "" || !slices.Contains(args, "--proxy-listen")) {
			break
		}
	}
	s.out = out.String()
	go io.Copy(io.Discard, pr) // whatever else it prints
	if s.base == "" {
		t.Fatalf("serve printed %q and no address; its stderr:\n%s", s.out, s.stderr.String())
	}
	return s
}

// waitRefusing returns once the server refuses new connections, as it does
// from the moment its shutdown begins.
func (s *served) waitRefusing(t *testing.T) {
	t.Helper()
	host := strings.TrimPrefix(s.base, "http://")
	tick := time.NewTicker(2 * time.Millisecond) // polls a condition; orders nothing
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-tick.C {
		conn, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return
		}
		conn.Close()
	}
	t.Fatalf("serve still takes connections on %s 10s after its context ended", host)
}

// wait returns serve's exit status, failing the test if it has not
// stopped within 10 s.
func (s *served) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.done:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("serve did not stop; its stderr:\n%s", s.stderr.String())
		return -1
	}
}

// TestServe_GCHeadroomIsNoFlag: memory is Go's own (GOGC, GOMEMLIMIT);
// the collector flag serve once had is refused, not silently taken.
func TestServe_GCHeadroomIsNoFlag(t *testing.T) {
	_, errs, code := run(t, t.TempDir(), "", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--gc-headroom", "1")
	if code != 2 || !strings.Contains(errs, "gc-headroom") {
		t.Errorf("serve --gc-headroom 1 = %d %q, want a usage error (2) naming the flag", code, errs)
	}
}
