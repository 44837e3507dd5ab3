package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
// usage, whose output tokens tell the calls apart, counts each call seen
// complete once and otherwise only calls the kill cut off, and the audit
// log's 200s are at least the calls seen complete and at most the
// answers the upstream began.
func TestDurability_KillKeepsTheRecordsOfAnsweredCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real broker")
	}
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skip("builds, kills and restarts a real broker (about 10 s): runs with BOXBROKER_FULL=1 (./test.sh's full run, CI)")
	}
	bin, data, env, cli := killableBroker(t)
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-JOURNALTEST", "credential", "set", "anthropic")

	// The upstream answers each call at once, 20 KB long (more than
	// net/http's buffers hold, so that the broker's holding back the last
	// byte is what keeps the box from having the whole answer before it
	// is journaled), with its number n as its output tokens, so that the
	// usage tells which calls it counts; began is the last n.
	var began atomic.Int64
	pad := strings.Repeat("ok ", 20<<10/3)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n := began.Add(1)
		answer := fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"%s"}],"usage":{"input_tokens":10,"output_tokens":%d}}`, pad, n)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(answer)))
		io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)

	start := func() (*exec.Cmd, string) { return serveChild(t, bin, env, "--anthropic-url", up.URL) }
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
	var mu sync.Mutex
	seenN := map[int64]bool{} // the n of each call seen complete
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
				if err != nil {
					continue // cut off by the kill: not seen complete
				}
				var a struct {
					Usage struct {
						OutputTokens int64 `json:"output_tokens"`
					} `json:"usage"`
				}
				if resp.StatusCode != 200 || json.Unmarshal(body, &a) != nil || a.Usage.OutputTokens == 0 {
					t.Errorf("a call was answered %d %.200s", resp.StatusCode, body)
					return
				}
				mu.Lock()
				seenN[a.Usage.OutputTokens] = true
				if len(seenN) >= before {
					once.Do(func() { close(reached) })
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("after 60 s, %d calls complete; want %d before the kill", len(seenN), before)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cancel()
	wg.Wait()
	seen, upper := int64(len(seenN)), began.Load()

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
	counts := func() (audited, used, out int64) {
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
			out += u.OutputTokens
		}
		return audited, used, out
	}
	// The restarted broker hands what the journal held to the spool and
	// replays it at once; wait for the rows (polling the store for a
	// condition, bounded).
	restarted := time.Now()
	audited, used, out := counts()
	for (audited < seen || used < seen) && time.Since(restarted) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
		audited, used, out = counts()
	}
	if audited < seen || used < seen {
		t.Errorf("%d calls seen complete before kill -9; after the restart the audit log holds %d and the usage %d calls", seen, audited, used)
	}
	if audited > upper || used > upper {
		t.Errorf("the upstream began %d answers; the audit log holds %d and the usage %d calls: some counted twice", upper, audited, used)
	}
	// The usage counts every call seen complete once, and beyond them
	// only calls the upstream answered and the kill cut off, each at
	// most once: what it counts past the calls seen complete must be a
	// set of those.
	var seenOut int64
	var unseen []int64
	for n := int64(1); n <= upper; n++ {
		if seenN[n] {
			seenOut += n
		} else {
			unseen = append(unseen, n)
		}
	}
	if len(unseen) > 20 {
		t.Fatalf("%d answers begun upstream were not seen complete; want at most 20", len(unseen))
	}
	found := false
	for set := 0; set < 1<<len(unseen) && !found; set++ {
		calls, sum := int64(0), int64(0)
		for i, n := range unseen {
			if set&(1<<i) != 0 {
				calls++
				sum += n
			}
		}
		found = calls == used-seen && sum == out-seenOut
	}
	if !found {
		t.Errorf("the usage counts %d calls and %d output tokens; the calls seen complete are %d with %d, and no set of the %d cut off (%v) makes up the rest: a call counted twice or lost",
			used, out, seen, seenOut, len(unseen), unseen)
	}
	t.Logf("kill -9 after %d calls seen complete (%d answers begun upstream): %d audited, %d in usage after the restart, within %s",
		seen, upper, audited, used, time.Since(restarted).Round(10*time.Millisecond))
}
