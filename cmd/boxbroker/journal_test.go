package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestDurability_KillKeepsTheRecordsOfAnsweredCalls kills -9 a broker
// while model calls of a box with no budget (settled in batches, audited
// in batches) complete one after another, restarts it, and checks that
// every call the client saw complete — a 200 with its whole body — has
// its audit entry and its usage, and that none is counted twice: the
// audit log's 200s and the usage's calls are equal, at least the calls
// seen complete, and at most the answers the upstream began.
func TestDurability_KillKeepsTheRecordsOfAnsweredCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real broker")
	}
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skip("builds, kills and restarts a real broker (about 10 s): runs with BOXBROKER_FULL=1 (./test.sh's full run, CI)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "boxbroker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	env := append(os.Environ(), "BOXBROKER_MASTER_KEY=", "BOXBROKER_STORE=", "BOXBROKER_DATA="+data)
	cli := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v %s", args, err, stderrOf(err))
		}
		return strings.TrimSpace(string(out))
	}
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-JOURNALTEST", "credential", "set", "anthropic")

	// The upstream answers each call at once, with its usage; began
	// counts the answers it began to write.
	var began atomic.Int64
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":10,"output_tokens":2}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		began.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)

	var stderrs []*bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			for i, b := range stderrs {
				t.Logf("stderr of serve %d:\n%s", i+1, b.String())
			}
		}
	})
	start := func() (*exec.Cmd, string) {
		cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn",
			"--anthropic-url", up.URL)
		cmd.Env = env
		stderr := &bytes.Buffer{}
		stderrs = append(stderrs, stderr)
		cmd.Stderr = stderr
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			cmd.Wait()
			t.Fatalf("serve printed %q: %v", line, err)
		}
		_, url, _ := strings.Cut(strings.TrimSpace(line), "listening on ")
		go io.Copy(io.Discard, stdout)
		return cmd, url
	}
	cmd, url := start()
	post := func(ctx context.Context, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	resp, err := post(t.Context(), "/api/box/declaration", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("report = %v %v", resp, err)
	}
	resp.Body.Close()

	// Eight clients call one after another; the kill comes once 200
	// calls were seen complete, while the rest are under way.
	const clients, before = 8, 200
	var complete atomic.Int64
	reached := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := post(ctx, "/llm/anthropic/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":100,"messages":[]}`)
				if err != nil {
					return // the broker died
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(body) != answer {
					if resp.StatusCode != 200 && err == nil {
						t.Errorf("a call was answered %d %s", resp.StatusCode, body)
						return
					}
					continue // cut off by the kill: not seen complete
				}
				if complete.Add(1) >= before {
					once.Do(func() { close(reached) })
				}
			}
		}()
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("after 60 s, %d calls complete; want %d before the kill", complete.Load(), before)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cancel()
	wg.Wait()
	seen, upper := complete.Load(), began.Load()

	cmd, _ = start()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	cfg := server.Config{DataDir: data}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	month := spend.Month(time.Now())
	counts := func() (audited, used int64) {
		es, err := st.ListAudit(context.Background(), store.AuditQuery{Box: "alpha", Limit: 1 << 20})
		if err != nil {
			t.Fatalf("ListAudit: %v", err)
		}
		for _, e := range es {
			if e.Route == "/llm/anthropic/v1/messages" && e.Status == 200 {
				audited++
			}
		}
		us, err := st.ListUsage(context.Background(), "alpha", month)
		if err != nil {
			t.Fatalf("ListUsage: %v", err)
		}
		for _, u := range us {
			used += u.Calls
		}
		return audited, used
	}
	// The restarted broker hands what the journal held to the spool and
	// replays it at once; wait for the rows (polling the store for a
	// condition, bounded).
	restarted := time.Now()
	audited, used := counts()
	for (audited < seen || used < seen) && time.Since(restarted) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
		audited, used = counts()
	}
	if audited < seen || used < seen {
		t.Errorf("%d calls seen complete before kill -9; after the restart the audit log holds %d and the usage %d calls", seen, audited, used)
	}
	if audited > upper || used > upper {
		t.Errorf("the upstream began %d answers; the audit log holds %d and the usage %d calls: some counted twice", upper, audited, used)
	}
	if audited != used {
		t.Errorf("audit log holds %d answered calls, usage %d: one of them counted a call twice or lost one", audited, used)
	}
	t.Logf("kill -9 after %d calls seen complete (%d answers begun upstream): %d audited, %d in usage after the restart, within %s",
		seen, upper, audited, used, time.Since(restarted).Round(10*time.Millisecond))
}
