package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestServe_FirstSignalUnready_SecondStopsAtOnce: from the first signal
// /readyz answers 503 on the admin listener while a stream drains, and a
// second signal ends the drain at once rather than after the grace (a
// minute here); the call answered before the signals and the stream cut
// off are in the audit log after.
func TestServe_FirstSignalUnready_SecondStopsAtOnce(t *testing.T) {
	up := heldStreams(t, "m", true)
	dir := t.TempDir()
	token, _, _ := run(t, dir, "", "box", "add", "salad")
	token = strings.TrimSpace(token)
	run(t, dir, "sk-ant-api03-SHUTDOWN", "credential", "set", "anthropic")

	ctx, first := context.WithCancel(context.Background())
	defer first()
	again, second := context.WithCancel(context.Background())
	defer second()
	srv := startServeAgain(t, ctx, again, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--anthropic-url", up.URL, "--shutdown-grace", "1m")
	if srv.admin == "" {
		t.Fatalf("serve printed no admin address:\n%s", srv.out)
	}
	post := func(path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s = %v %v", path, resp, err)
		}
		return resp
	}
	post("/api/box/declaration", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`).Body.Close()
	resp := post("/llm/anthropic/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":10,"messages":[]}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	stream := post("/llm/anthropic/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":10,"messages":[],"stream":true}`)
	defer stream.Body.Close()
	rd := bufio.NewReader(stream.Body)
	if line, _ := rd.ReadString('\n'); line != "event: message_start\n" {
		t.Fatalf("first line %q", line)
	}
	readyz := func() int {
		resp, err := http.Get(srv.admin + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := readyz(); got != 200 {
		t.Fatalf("/readyz before the signal = %d, want 200", got)
	}

	first() // the first SIGINT
	srv.waitRefusing(t)
	// The box port refuses from the first signal; /readyz says so from
	// the same moment (the flag is set before the listener closes).
	if got := readyz(); got != 503 {
		t.Errorf("/readyz while draining = %d, want 503", got)
	}
	select {
	case code := <-srv.done:
		t.Fatalf("serve stopped (%d) with a stream in flight and 1m of grace left", code)
	default:
	}
	// serve says so on a goroutine of its own that wakes at the same
	// signal as the server's drain, so the listener may close before the
	// line is written: wait for the line, not for the listener.
	until(t, "serve's stderr at the first signal says a second interrupt stops at once", func() bool {
		return strings.Contains(srv.stderr.String(), "interrupt again")
	})

	began := time.Now()
	second() // the second SIGINT
	if code := srv.wait(t); code != 0 {
		t.Errorf("serve exited %d after the second signal", code)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("serve took %v to stop after the second signal, want at once", took)
	}
	if _, err := io.ReadAll(rd); err == nil {
		t.Errorf("the stream ended cleanly; want it cut off by the second signal")
	}
	out, errs, code := run(t, dir, "", "audit", "salad")
	if code != 0 || strings.Count(out, "/llm/anthropic/v1/messages") != 2 {
		t.Errorf("audit after the stop = %d:\n%s%s\nwant both model calls, the answered one and the stream cut off", code, out, errs)
	}
}

// TestTwoSignals: the first signal ends the first context only, the
// second the second.
func TestTwoSignals(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	first, second := twoSignals(sigs)
	if first.Err() != nil || second.Err() != nil {
		t.Fatal("a context ended before any signal")
	}
	sigs <- syscall.SIGINT
	<-first.Done()
	select {
	case <-second.Done():
		t.Fatal("the second context ended at the first signal")
	case <-time.After(50 * time.Millisecond): // a context ended wrongly would have by now
	}
	sigs <- syscall.SIGTERM
	select {
	case <-second.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the second context did not end at the second signal")
	}
}

// TestServe_SignalsToTheBinary: the same with the built binary and real
// signals, as an operator presses Ctrl-C twice: after the first SIGINT
// /readyz is 503 and serve keeps running while a stream is open; after
// the second it exits at once, well within its grace.
func TestServe_SignalsToTheBinary(t *testing.T) {
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skip("builds and signals a real broker: runs with BOXBROKER_FULL=1 (./test.sh's full run, CI)")
	}
	bin, _, env, cli := killableBroker(t)
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-SIGNALTEST", "credential", "set", "anthropic")
	up := heldStreams(t, "m", false)
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-level", "warn",
		"--anthropic-url", up.URL, "--shutdown-grace", "1m")
	cmd.Env = env
	stderr := &brokertest.Buffer{}
	cmd.Stderr = stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", stderr.String())
		}
	})
	sc := bufio.NewScanner(stdout)
	var base, adminURL string
	for sc.Scan() && (base == "" || adminURL == "") {
		if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
			base = strings.TrimSpace(rest)
		}
		if _, rest, ok := strings.Cut(sc.Text(), "owner's page on "); ok {
			adminURL = strings.TrimSpace(rest)
		}
	}
	go io.Copy(io.Discard, stdout)
	do := func(path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s = %v %v", path, resp, err)
		}
		return resp
	}
	do("/api/box/declaration", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`).Body.Close()
	stream := do("/llm/anthropic/v1/messages", `{"stream":true}`)
	defer stream.Body.Close()
	if line, _ := bufio.NewReader(stream.Body).ReadString('\n'); line != "event: message_start\n" {
		t.Fatalf("first line %q", line)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	cmd.Process.Signal(syscall.SIGINT)
	status := 0
	tick := time.NewTicker(5 * time.Millisecond) // polls a condition; orders nothing
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); status != 503 && time.Now().Before(deadline); <-tick.C {
		if resp, err := http.Get(adminURL + "/readyz"); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		}
	}
	if status != 503 {
		t.Fatalf("/readyz after the first SIGINT = %d, want 503 within 10 s", status)
	}
	select {
	case err := <-exited:
		t.Fatalf("serve exited (%v) at the first SIGINT with a stream open and 1m of grace", err)
	default:
	}
	began := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited %v after the second SIGINT, want 0", err)
		}
		t.Logf("serve exited %v after the second SIGINT", time.Since(began).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("serve still runs 10 s after the second SIGINT, want it stopped at once")
	}
}

// TestReady_AsksReadyz: `boxbroker ready` exits 0 while serve is ready,
// 1 once it drains (and once it is gone), as a container's HEALTHCHECK
// runs it.
func TestReady_AsksReadyz(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := startServe(t, ctx, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "off")
	listen := strings.TrimPrefix(srv.base, "http://")
	out, errs, code := runIn(t, map[string]string{"BOXBROKER_LISTEN": listen}, "", "ready")
	if code != 0 || !strings.Contains(out, `"ready":true`) {
		t.Errorf("ready against a ready serve = %d %q %q, want 0", code, out, errs)
	}
	_, port, _ := strings.Cut(listen, ":")
	if code, _, _ := runEnv(t, map[string]string{"BOXBROKER_LISTEN": "0.0.0.0:" + port}, "", "ready"); code != 0 {
		t.Errorf("ready with a wildcard BOXBROKER_LISTEN = %d, want it to ask 127.0.0.1 and get 0", code)
	}
	cancel()
	srv.wait(t)
	if _, errs, code := runIn(t, nil, "", "ready", "--url", srv.base); code != 1 || !strings.Contains(errs, "not ready") {
		t.Errorf("ready against a stopped serve = %d %q, want 1, not ready", code, errs)
	}
}

// heldStreams is an Anthropic stand-in whose streams send their first
// event and are held open until the broker closes them or the test
// ends. With answerOthers a request that does not ask for a stream gets
// the stand-in's whole answer; without, every request is a held stream.
func heldStreams(t *testing.T, model string, answerOthers bool) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answerOthers {
			body, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(body), `"stream":true`) {
				brokertest.AnthropicStandIn(w, r)
				return
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, brokertest.SSEEvents(model, "hi")[0])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handlers return, so Close does not wait on them
	return up
}

// TestCLI_ListenPortZeroNamesNoURL: a BOXBROKER_LISTEN of port 0 lets
// serve pick its port, which only serve's `listening on` line says; ready,
// box add and secret set point there rather than ask or print port 0.
func TestCLI_ListenPortZeroNamesNoURL(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"BOXBROKER_LISTEN": "127.0.0.1:0", "BOXBROKER_DATA": dir}
	for _, args := range [][]string{{"ready"}, {"box", "add", "salad"}} {
		out, errs, code := runIn(t, env, "", args...)
		if code != 2 || !strings.Contains(errs, "`listening on` line") || strings.Contains(out, ":0") {
			t.Errorf("%s with BOXBROKER_LISTEN=127.0.0.1:0 = %d %q %q, want a usage error pointing to serve's listening line", strings.Join(args, " "), code, out, errs)
		}
	}
	if _, errs, code := runIn(t, env, "", "box", "add", "salad", "--url", "http://127.0.0.1:8787"); code != 0 {
		t.Errorf("box add --url with BOXBROKER_LISTEN=127.0.0.1:0 = %d %q, want 0", code, errs)
	}
}
