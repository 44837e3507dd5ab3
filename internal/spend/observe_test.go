package spend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// stream is a Messages stream as the Anthropic API sends it, with caches
// and a cumulative message_delta.
func stream(eol string) string {
	lines := []string{
		"event: message_start",
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":400,"cache_creation":{"ephemeral_5m_input_tokens":60,"ephemeral_1h_input_tokens":40},"output_tokens":1}}}`,
		"",
		"event: content_block_start",
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		"",
		"event: ping",
		`data: {"type": "ping"}`,
		"",
		"event: content_block_delta",
		// Text that looks like an event is only text.
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":999999}}"}}`,
		"",
		"event: message_delta",
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
		"",
		"event: message_delta",
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}`,
		"",
		"event: message_stop",
		`data: {"type":"message_stop"}`,
		"",
	}
	return strings.Join(lines, eol) + eol
}

var wantStream = Tokens{Input: 25, CacheWrite: 100, CacheWrite1h: 40, CacheRead: 400, Output: 42}

// chunked hands out its data n bytes a read.
type chunked struct {
	data   []byte
	n      int
	closed bool
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

func (c *chunked) Close() error { c.closed = true; return nil }

// observe reads body through an observer n bytes a read, up to stop bytes
// (all when stop < 0), closes it, and returns what it passed on and what it
// read.
func observe(t *testing.T, body string, sse bool, n, stop int) (string, reading) {
	t.Helper()
	var mu sync.Mutex
	r := &reading{open: true}
	src := &chunked{data: []byte(body), n: n}
	o := &observer{body: src, sse: sse, mu: &mu, r: r}
	var out bytes.Buffer
	buf := make([]byte, 32<<10)
	for stop < 0 || out.Len() < stop {
		k, err := o.Read(buf)
		out.Write(buf[:k])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Read = %v", err)
		}
	}
	if err := o.Close(); err != nil || !src.closed {
		t.Fatalf("Close = %v, closed %v, want nil, true", err, src.closed)
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String(), *r
}

func TestObserver_StreamEveryChunking(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		body := stream(eol)
		for n := 1; n <= len(body); n = n*2 + 1 {
			t.Run(fmt.Sprintf("eol %q, %d bytes a read", eol, n), func(t *testing.T) {
				out, r := observe(t, body, true, n, -1)
				if out != body {
					t.Fatalf("observer changed the stream")
				}
				if !r.measured || r.open || r.model != "claude-sonnet-4-5-20250929" || r.tokens != wantStream {
					t.Errorf("reading = %+v, want measured, closed, sonnet, %+v", r, wantStream)
				}
			})
		}
	}
}

func TestObserver_StreamCutOffIsUnmeasured(t *testing.T) {
	body := stream("\n")
	cut := strings.Index(body, "event: message_delta")
	_, r := observe(t, body, true, 7, cut)
	if r.measured || r.open || r.tokens.Input != 25 || r.tokens.Output != 1 {
		t.Errorf("reading of a stream cut before message_delta = %+v, want unmeasured, closed, input 25, output 1", r)
	}
}

func TestObserver_StreamDeltaCarriesInput(t *testing.T) {
	// Newer API versions repeat the input counts, cumulative, in message_delta.
	body := "data: " + `{"type":"message_start","message":{"model":"m","usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
		"data: " + `{"type":"message_delta","usage":{"input_tokens":9,"cache_read_input_tokens":3,"output_tokens":7}}` + "\n\n"
	_, r := observe(t, body, true, 64, -1)
	if want := (Tokens{Input: 9, CacheRead: 3, Output: 7}); !r.measured || r.tokens != want {
		t.Errorf("reading = %+v, want measured %+v", r, want)
	}
}

func TestObserver_StreamLongLinesSkipped(t *testing.T) {
	long := `data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"` + strings.Repeat("x", 3*MaxLine) + `"}}` + "\n\n"
	body := strings.Replace(stream("\n"), "event: message_delta", long+"event: message_delta", 1)
	out, r := observe(t, body, true, 4096, -1)
	if out != body {
		t.Fatalf("observer changed the stream")
	}
	if !r.measured || r.tokens != wantStream {
		t.Errorf("reading = %+v, want measured %+v", r, wantStream)
	}
}

func TestObserver_StreamNoUsage(t *testing.T) {
	body := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	_, r := observe(t, body, true, 10, -1)
	if r.measured || (r.tokens != Tokens{}) {
		t.Errorf("reading of an error stream = %+v, want unmeasured, no tokens", r)
	}
}

const jsonAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5-20251001","content":[{"type":"text","text":%s}],"stop_reason":"end_turn","usage":{"input_tokens":11,"cache_creation_input_tokens":0,"cache_read_input_tokens":2,"output_tokens":%d}}`

func TestObserver_JSON(t *testing.T) {
	tests := []struct {
		name string
		text string
	}{
		{"small", `"hello"`},
		// A text holding "usage": comes before the real usage.
		{"text that looks like usage", `"\"usage\":{\"output_tokens\":5}"`},
		{"over 1 MiB", `"` + strings.Repeat("y", 1<<20+64<<10) + `"`},
		{"just under 1 MiB", `"` + strings.Repeat("y", 1<<20-50) + `"`},
		// A model named after the content, and usage given twice: the
		// last is the answer's, as encoding/json reads it.
		{"model after a large content", `"` + strings.Repeat("y", 300<<10) + `"}],"model":"claude-haiku-4-5-20251001","usage":{"output_tokens":1},"content":[{"text":""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(jsonAnswer, tt.text, 77)
			for _, n := range []int{1 << 20, 4093} {
				out, r := observe(t, body, false, n, -1)
				if out != body {
					t.Fatalf("observer changed the answer")
				}
				want := Tokens{Input: 11, CacheRead: 2, Output: 77}
				if !r.measured || r.model != "claude-haiku-4-5-20251001" || r.tokens != want {
					t.Errorf("%d bytes a read: reading = model %q measured %v %+v, want haiku, measured, %+v", n, r.model, r.measured, r.tokens, want)
				}
			}
		})
	}
}

func TestObserver_JSONCutOffIsUnmeasured(t *testing.T) {
	body := fmt.Sprintf(jsonAnswer, `"hello"`, 3)
	_, r := observe(t, body, false, 16, len(body)-10)
	if r.measured || r.open {
		t.Errorf("reading of an answer closed before its end = %+v, want unmeasured, closed", r)
	}
	_, r = observe(t, `{"type":"message","content":[]}`, false, 16, -1)
	if r.measured {
		t.Errorf("reading of an answer with no usage = %+v, want unmeasured", r)
	}
}

func TestObserver_JSONMemoryBounded(t *testing.T) {
	tests := []struct {
		name     string
		text     int // bytes of the answer's text
		measured bool
	}{
		{"under MaxAnswer", MaxAnswer - 1024, true},
		{"over MaxAnswer", 2 * MaxAnswer, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			body := fmt.Sprintf(jsonAnswer, `"`+strings.Repeat("z", tt.text)+`"`, 1)
			o := &observer{body: &chunked{data: []byte(body), n: 32 << 10}, mu: &mu, r: &reading{open: true}}
			buf := make([]byte, 32<<10)
			kept := func() int {
				n := cap(o.pending)
				if o.answer != nil {
					n += cap(*o.answer)
				}
				return n
			}
			peak := 0
			for {
				_, err := o.Read(buf)
				peak = max(peak, kept())
				if err != nil {
					break
				}
			}
			if err := o.Close(); err != nil {
				t.Fatal(err)
			}
			if after := kept(); after != 0 {
				t.Errorf("observer keeps %d bytes after the answer ended, want 0", after)
			}
			// One read's bytes, and the answer up to MaxAnswer (as append
			// grows it).
			if limit := len(buf) + 2*MaxAnswer; peak > limit {
				t.Errorf("observer kept up to %d bytes of a %d-byte answer, want at most %d", peak, len(body), limit)
			}
			if o.r.measured != tt.measured || tt.measured && o.r.tokens.Output != 1 {
				t.Errorf("reading = %+v, want measured %v, output 1", o.r, tt.measured)
			}
		})
	}
}

// BenchmarkObserve measures reading usage as a stream passes: the same
// Messages stream proxied by a ReverseProxy over the bare transport and
// over the metering transport (every byte through an observer),
// alternating in every iteration. It reports the time to the first event
// and to the end for each, and metered over bare as ttfe-ratio and
// stream-ratio. No store is involved; BenchmarkStream measures the whole.
//
//	go test -run '^$' -bench BenchmarkObserve -benchtime 500x ./internal/spend/
func BenchmarkObserve(b *testing.B) {
	var events []string
	events = append(events, "event: message_start\ndata: "+`{"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":25,"output_tokens":1}}}`+"\n\n")
	for i := 0; i < 200; i++ {
		events = append(events, "event: content_block_delta\ndata: "+`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, hello, hello. "}}`+"\n\n")
	}
	events = append(events, "event: message_delta\ndata: "+`{"type":"message_delta","usage":{"output_tokens":1400}}`+"\n\n", "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	target, _ := url.Parse(up.URL)
	m, err := New(Config{Store: noStore{}})
	if err != nil {
		b.Fatal(err)
	}
	base := proxy.NewTransport(proxy.TransportOptions{})
	var tickets []*ticket
	front := func(rt http.RoundTripper, meter bool) *httptest.Server {
		rp := proxy.New(func(pr *httputil.ProxyRequest) { pr.SetURL(target) }, rt, nil)
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if meter {
				tk := &ticket{}
				tickets = append(tickets, tk)
				r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, tk))
			}
			rp.ServeHTTP(w, r)
		}))
	}
	bare, metered := front(base, false), front(m.Transport(base), true)
	defer bare.Close()
	defer metered.Close()
	client := &http.Client{Transport: proxy.NewTransport(proxy.TransportOptions{})}
	var ttfe, whole [2][]time.Duration
	var cut [2]int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, srv := range []*httptest.Server{bare, metered} {
			first, all, err := streamOnce(client, srv.URL+"/v1/messages", `{}`)
			if err != nil {
				// The standard library's proxy now and then cuts a stream on
				// loopback, metered or not (go1.26.8, about 1 in 10⁴);
				// counted and left out.
				cut[j]++
				continue
			}
			ttfe[j] = append(ttfe[j], first)
			whole[j] = append(whole[j], all)
		}
	}
	b.StopTimer()
	reportMedians(b, "bare", ttfe, whole)
	b.ReportMetric(float64(cut[0]+cut[1]), "cut-streams")
	unmeasured := 0
	for _, tk := range tickets {
		if len(tk.readings) != 1 || !tk.readings[0].measured || tk.readings[0].tokens.Output != 1400 {
			unmeasured++
		}
	}
	if unmeasured > cut[1] {
		b.Fatalf("%d metered streams were not measured, and only %d were cut", unmeasured, cut[1])
	}
}

// reportMedians reports the median time to the first event and to the
// end of the baseline's streams (ttfe[0], whole[0]) and the metered ones,
// and metered over baseline as ttfe-ratio and stream-ratio. Medians, as
// the machine is shared and a mean follows its worst moments.
func reportMedians(b *testing.B, baseline string, ttfe, whole [2][]time.Duration) {
	if len(ttfe[0]) == 0 || len(ttfe[1]) == 0 {
		return
	}
	med := func(ds []time.Duration) float64 {
		ds = append([]time.Duration(nil), ds...)
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Nanoseconds())
	}
	b.ReportMetric(med(ttfe[0]), "ttfe-"+baseline+"-ns")
	b.ReportMetric(med(ttfe[1]), "ttfe-metered-ns")
	b.ReportMetric(med(ttfe[1])/med(ttfe[0]), "ttfe-ratio")
	b.ReportMetric(med(whole[0]), "stream-"+baseline+"-ns")
	b.ReportMetric(med(whole[1]), "stream-metered-ns")
	b.ReportMetric(med(whole[1])/med(whole[0]), "stream-ratio")
}

// streamOnce posts body to url and reads the stream: it returns the time
// to the first event and to the end.
func streamOnce(client *http.Client, url, body string) (first, all time.Duration, err error) {
	start := time.Now()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return 0, 0, fmt.Errorf("first event: %w", err)
		}
		if !strings.Contains(line, "message_start") && first == 0 && strings.HasPrefix(line, "data:") {
			return 0, 0, fmt.Errorf("first event is not message_start: %q", line)
		}
		if line == "\n" {
			break
		}
		first = 1
	}
	first = time.Since(start)
	if _, err := io.Copy(io.Discard, br); err != nil {
		return 0, 0, err
	}
	return first, time.Since(start), nil
}

// noStore is a store.Spend that holds nothing, for BenchmarkObserve.
type noStore struct{ store.Spend }

// TestObserver_JSONAsEncodingJSON: an answer's model and usage are read
// as json.Unmarshal read them before, names matched exactly.
func TestObserver_JSONAsEncodingJSON(t *testing.T) {
	type usage struct {
		InputTokens              *int64 `json:"input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		CacheCreation            *struct {
			Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
		} `json:"cache_creation"`
		ServerToolUse *struct {
			WebSearchRequests *int64 `json:"web_search_requests"`
		} `json:"server_tool_use"`
	}
	set := func(to *int64, v *int64) {
		if v != nil && *v >= 0 {
			*to = *v
		}
	}
	for _, body := range []string{
		`{"model":"m","usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":3,"cache_read_input_tokens":4,"cache_creation":{"ephemeral_5m_input_tokens":1,"ephemeral_1h_input_tokens":2}}}`,
		`{"usage":{"input_tokens":1},"usage":{"output_tokens":2},"model":"a","model":"b"}`,
		`{"usage":{"input_tokens":1,"cache_creation":{"ephemeral_1h_input_tokens":9}},"usage":null,"usage":{"output_tokens":2}}`,
		`{"usage":{"cache_creation":{"ephemeral_1h_input_tokens":9},"cache_creation":null}}`,
		`{"usage":{"input_tokens":-5,"output_tokens":null,"server_tool_use":{"web_search_requests":1}},"model":null}`,
		`{"content":[{"usage":{"input_tokens":100}}],"usage":{"input_tokens":1}}`,
		`{"model":"m","usage":{"server_tool_use":{"web_search_requests":4},"server_tool_use":null}}`,
		`{"model":"m","usage":{"server_tool_use":{"web_search_requests":1.5}}}`,
		`{"model":"m","usage":{"input_tokens":1.5}}`,
		`{"model":"m","usage":{"input_tokens":"1"}}`,
		`{"model":"m","usage":[]}`,
		`{"model":5,"usage":{}}`,
		`{"model":"m","usage":null}`,
		`{"model":"m"}`,
		`{"model":"m","usage":{}} x`,
		`<html>Bad gateway</html>`,
		``,
		`{"model":"claude\u002dhaiku","usage":{"output_tokens":1}}`,
	} {
		var want struct {
			Model string `json:"model"`
			Usage *usage `json:"usage"`
		}
		var wantTokens Tokens
		wantMeasured := json.Unmarshal([]byte(body), &want) == nil && want.Usage != nil
		if wantMeasured {
			u := want.Usage
			set(&wantTokens.Input, u.InputTokens)
			set(&wantTokens.Output, u.OutputTokens)
			set(&wantTokens.CacheWrite, u.CacheCreationInputTokens)
			set(&wantTokens.CacheRead, u.CacheReadInputTokens)
			if u.CacheCreation != nil {
				set(&wantTokens.CacheWrite1h, u.CacheCreation.Ephemeral1h)
			}
			if u.ServerToolUse != nil {
				set(&wantTokens.WebSearches, u.ServerToolUse.WebSearchRequests)
			}
		} else {
			want.Model = ""
		}
		for _, n := range []int{1, 5, 4096} {
			_, r := observe(t, body, false, n, -1)
			if r.measured != wantMeasured || r.model != want.Model || r.tokens != wantTokens {
				t.Errorf("%d bytes a read: reading of %s = measured %v %q %+v, want %v %q %+v",
					n, body, r.measured, r.model, r.tokens, wantMeasured, want.Model, wantTokens)
			}
		}
	}
}

// TestObserver_StreamEventsAsEncodingJSON: message_start and
// message_delta data are read as json.Unmarshal read them before.
func TestObserver_StreamEventsAsEncodingJSON(t *testing.T) {
	start := `{"type":"message_start","message":{"model":"claude\u002dhaiku","usage":{"input_tokens":5,"output_tokens":1}}}`
	tests := []struct {
		name     string
		delta    string
		measured bool
		tokens   Tokens
	}{
		{"cumulative", `{"type":"message_delta","usage":{"output_tokens":7}}`, true, Tokens{Input: 5, Output: 7}},
		{"no usage", `{"type":"message_delta","usage":null}`, false, Tokens{Input: 5, Output: 1}},
		{"not JSON", `{"type":"message_delta","usage":{"output_tokens":7}`, false, Tokens{Input: 5, Output: 1}},
		{"type last", `{"usage":{"output_tokens":7},"type":"message_delta"}`, true, Tokens{Input: 5, Output: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "event: message_start\ndata: " + start + "\n\nevent: message_delta\ndata: " + tt.delta + "\n\n"
			_, r := observe(t, body, true, 3, -1)
			if r.measured != tt.measured || r.model != "claude-haiku" || r.tokens != tt.tokens {
				t.Errorf("reading = %+v, want measured %v, claude-haiku, %+v", r, tt.measured, tt.tokens)
			}
		})
	}
}
