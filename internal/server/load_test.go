package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// loadStreamsEnv, set to a number, makes TestLoad_HealthyStoreAnswers open
// that many streams at once instead of its default.
const loadStreamsEnv = "BOXBROKER_TEST_LOAD_STREAMS"

// slowStream is a stand-in Anthropic API that answers every Messages call
// as an event stream spread over about a second, as a model writes.
func slowStream(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	for i, ev := range brokertest.SSEEvents("claude-sonnet-4-5", "Hello from a slow stand-in.") {
		if i > 0 {
			select {
			case <-time.After(150 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, ev)
		w.(http.Flusher).Flush()
	}
}

// refusalLog keeps the log lines of requests refused for the store, to
// name the store calls that did not answer.
type refusalLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *refusalLog) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"refusal":"store"`)) || bytes.Contains(p, []byte("store deadline")) {
		l.mu.Lock()
		l.lines = append(l.lines, string(p))
		l.mu.Unlock()
	}
	return len(p), nil
}

// TestLoad_HealthyStoreAnswers opens many streaming Messages calls at
// once (200, or BOXBROKER_TEST_LOAD_STREAMS) through the real handler on
// a SQLite store in a temporary directory, at serve's own store deadline,
// for a box with a budget, so that every call reserves its bound before
// it is forwarded and settles after. The store is healthy: no call may be
// refused for it.
func TestLoad_HealthyStoreAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("opens many streams at once")
	}
	streams := 200
	if s := os.Getenv(loadStreamsEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a number of streams", loadStreamsEnv, s)
		}
		streams = n
	}
	logs := &refusalLog{}
	b := brokertest.New(t, brokertest.Options{
		Anthropic: http.HandlerFunc(slowStream),
		Config: func(c *server.Config) {
			c.StoreDeadline = deadline.Default
			c.BoxConcurrent = 1 << 20
			c.LogLevel = "info"
		},
		ServerOptions: func(o *server.Options) {
			o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		},
	})
	tok := b.AddBox("busy")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	b.SetCredential("anthropic", "sk-ant-api03-load-test-credential")
	ctx := context.Background()
	if err := b.Server.Store.SetBudget(ctx, store.Budget{Box: "busy", Limit: 1 << 50, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.Sync()

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = streams
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	defer tr.CloseIdleConnections()
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hello"}]}`)
	type outcome struct {
		status int
		msg    string
	}
	out := make([]outcome, streams)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, b.URL+protocol.PrefixAnthropic+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("X-Api-Key", tok)
			req.Header.Set("Anthropic-Version", "2023-06-01")
			req.Header.Set("Content-Type", "application/json")
			<-start
			resp, err := client.Do(req)
			if err != nil {
				out[i] = outcome{msg: err.Error()}
				return
			}
			defer resp.Body.Close()
			out[i].status = resp.StatusCode
			if resp.StatusCode != http.StatusOK {
				var e protocol.Refusal
				raw, _ := io.ReadAll(resp.Body)
				if json.Unmarshal(raw, &e) == nil {
					out[i].msg = e.Error.Message
				} else {
					out[i].msg = string(raw)
				}
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	counts := map[string]int{}
	refused := 0
	for _, o := range out {
		if o.status == http.StatusOK {
			counts["200"]++
			continue
		}
		counts[strconv.Itoa(o.status)+" "+o.msg]++
		if o.status == http.StatusServiceUnavailable {
			refused++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%5d  %s", counts[k], k)
	}
	ops := map[string]int{}
	logs.mu.Lock()
	for _, l := range logs.lines {
		var line struct {
			Err string `json:"err"`
		}
		_ = json.Unmarshal([]byte(l), &line)
		if i := strings.Index(line.Err, ": "); i > 0 {
			bound := ""
			if j := strings.LastIndex(line.Err, "("); j > 0 {
				bound = " " + line.Err[j:]
			}
			ops[line.Err[:i]+bound]++
		}
	}
	logs.mu.Unlock()
	for op, n := range ops {
		t.Logf("store calls past the deadline: %d %q", n, op)
	}
	t.Logf("%d streams at once in %v", streams, took.Round(time.Millisecond))
	if refused > 0 {
		t.Errorf("%d of %d streams refused 503 by a healthy store, want 0", refused, streams)
	}
}
