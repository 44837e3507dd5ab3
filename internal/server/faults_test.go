package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// Upstream faults a faultServer can play.
const (
	faultOK        = "answers"
	faultDown      = "down"
	faultHangsUp   = "accepts and hangs up"
	faultGarbage   = "answers garbage"
	faultResets    = "resets before answering"
	faultHangs     = "never answers"
	faultResetsMid = "resets mid-answer"
	faultSlow      = "answers very slowly"
	faultCutEarly  = "declares a length and closes before its body"
)

// faultServer is one upstream for every forwarding capability (the
// Anthropic API, Fountain and an egress secret's host, told apart by
// path), which plays whichever fault it is set to.
type faultServer struct {
	t    *testing.T
	addr string

	mu   sync.Mutex // guards mode, srv and ln
	mode string
	srv  *http.Server
	ln   net.Listener
}

func newFaultServer(t *testing.T) *faultServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultServer{t: t, addr: ln.Addr().String(), mode: faultOK}
	fs.serve(ln)
	t.Cleanup(func() { fs.set(faultDown) })
	return fs
}

func (fs *faultServer) URL() string { return "http://" + fs.addr }

// serve serves on ln with a fresh http.Server; fs.mu is held or fs is new.
// It keeps no connection alive after an answer (each says Connection:
// close), so the broker's transport never holds an idle connection to it
// that a later set would close under it: every request meets the fault
// set on a connection of its own, with no wait for the broker to notice.
func (fs *faultServer) serve(ln net.Listener) {
	fs.ln = &hangUp{Listener: ln, fs: fs}
	fs.srv = &http.Server{Handler: http.HandlerFunc(fs.handle)}
	fs.srv.SetKeepAlivesEnabled(false)
	go fs.srv.Serve(fs.ln)
}

// set switches to mode. Every connection open so far is closed, so the
// broker's next request meets the fault on a fresh connection.
func (fs *faultServer) set(mode string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.srv != nil {
		fs.srv.Close()
		fs.srv = nil
	}
	fs.mode = mode
	if mode == faultDown {
		return // nothing listens
	}
	// The address was just let go of: a real socket, which no synctest
	// bubble can hold, and no event says when the kernel lets it be taken
	// again, so this polls, for at most a second.
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", fs.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		fs.t.Fatalf("listen again on %s: %v", fs.addr, err)
	}
	fs.serve(ln)
}

func (fs *faultServer) current() string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.mode
}

// hangUp is a listener that, while its server accepts and hangs up,
// closes each connection as soon as it is accepted.
type hangUp struct {
	net.Listener
	fs *faultServer
}

func (h *hangUp) Accept() (net.Conn, error) {
	for {
		c, err := h.Listener.Accept()
		if err != nil || h.fs.current() != faultHangsUp {
			return c, err
		}
		c.Close()
	}
}

// good is the answer each upstream gives when all is well: the Anthropic
// stand-in (a stream, or decide's structured output), Fountain's, or an
// egress host's plain answer, which never holds the secret's value.
func good(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/"):
		brokertest.AnthropicStandIn(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		brokertest.FountainStandIn(w, r)
	default:
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, strings.Repeat("an answer from the secret's host\n", 40))
	}
}

func (fs *faultServer) handle(w http.ResponseWriter, r *http.Request) {
	mode := fs.current()
	switch mode {
	case faultGarbage:
		conn, buf, _ := w.(http.Hijacker).Hijack()
		buf.WriteString("this is not HTTP at all\r\n\r\n")
		buf.Flush()
		conn.Close()
		return
	case faultResets:
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		return
	case faultCutEarly:
		io.Copy(io.Discard, r.Body)
		cutBeforeBody(w, r)
		return
	case faultHangs:
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
		return
	}
	// The good answer, replayed whole, slowly, or cut off halfway.
	rec := httptest.NewRecorder()
	good(rec, r)
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.Header().Del("Content-Length")
	body := rec.Body.Bytes()
	switch mode {
	case faultResetsMid:
		w.WriteHeader(rec.Code)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	case faultSlow:
		// Slowness is the fault played, over a real socket to the
		// broker's real transport: these sleeps are what is tested, not
		// a wait for an event.
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(rec.Code)
		for len(body) > 0 {
			n := min(len(body), max(len(body)/10, 1))
			if _, err := w.Write(body[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			body = body[n:]
			time.Sleep(20 * time.Millisecond)
		}
	default:
		w.WriteHeader(rec.Code)
		w.Write(body)
	}
}

// goodBody is the answer good gives to r.
func goodBody(method, path, body string) []byte {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer the key")
	good(rec, req)
	return rec.Body.Bytes()
}

// forwarder is one forwarding capability's request, and what its good
// answer is upstream.
type forwarder struct {
	name, method, path, body string
	upstream                 string // the path the upstream is asked for
	streams                  bool   // the answer is passed on as it comes
}

// TestUpstreamFaults_EveryForwardingCapability plays every upstream fault
// against every forwarding capability — inference, decide, egress and
// fountain — several times over: down, accepting and hanging up at once,
// garbage, a reset before answering, no answer at all, a reset halfway
// through the answer, an answer dribbled out slowly, and one that
// declares its length and closes before its body (a 502, as nothing of
// it was sent). Each turns into
// its documented answer: a 502 or 504 refusal naming the upstream, or,
// once a passed-on answer has begun, a stream that ends (short of its
// end, so the box can tell); a slow answer arrives whole. No credential,
// secret value or upstream address is in any answer, no credential,
// secret value or token in the logs, and no goroutine is left behind.
func TestUpstreamFaults_EveryForwardingCapability(t *testing.T) {
	const (
		anthropicKey = "sk-ant-api03-FAULTCANARY-anthropic-5c1e"
		fountainKey  = "fk-FAULTCANARY-fountain-8d2a"
		secretValue  = "sv-FAULTCANARY-secret-47b0"
		rounds       = 3
	)
	up := newFaultServer(t)
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs, Config: func(c *server.Config) {
		c.AnthropicURL, _ = url.Parse(up.URL())
		c.FountainURL, _ = url.Parse(up.URL())
		// Ten times the slow upstream's 100 ms before its head, so that
		// a loaded machine's scheduling does not make slow a timeout.
		c.UpstreamHeaderTimeout = time.Second
	}})
	token := b.AddBox("a")
	b.SetCredential(payer.SharedAnthropic, anthropicKey)
	b.SetCredential(payer.SharedFountain, fountainKey)
	b.SetSecret("a", "FAULTY", up.URL()+"/base", secretValue)
	b.Report(token, brokertest.Entry(protocol.Inference, "agent", "decide"), brokertest.Entry(protocol.Egress, "FAULTY"),
		brokertest.Entry(protocol.Fountain, "sandboxes"))
	// A sandbox of the box's own: a listing's answer is held to keep
	// only the box's items, so the streamed answer is one about an id.
	if err := b.Server.Store.AddResource(context.Background(), store.Resource{Box: "a", Kind: store.ResourceSandbox, ID: "sb-a", At: time.Now()}); err != nil {
		t.Fatal(err)
	}

	decideBody := `{"model":"claude-haiku-4-5","state":{"n":1},"questions":{"q":{"type":"choice","instructions":"Pick one.","criteria":["x","y"]}}}`
	forwarders := []forwarder{
		{"inference", "POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, "/v1/messages", true},
		{"decide", "POST", protocol.RouteDecide, decideBody, "/v1/messages", false},
		// The token in the query: a transport error's text holds the URL,
		// and so the value in its place, which must not reach the logs.
		{"egress", "GET", "/egress/FAULTY/data?key=" + token, ``, "/base/data", true},
		{"fountain", "GET", "/fountain/api/sandboxes/sb-a", ``, "/api/sandboxes/sb-a", true},
	}
	names := map[string]string{"inference": "Anthropic API", "decide": "Anthropic API", "egress": "host of the secret FAULTY", "fountain": "Fountain API"}
	want := func(fault string, f forwarder) int {
		switch fault {
		case faultHangs:
			return http.StatusGatewayTimeout
		case faultSlow, faultOK:
			return http.StatusOK
		case faultResetsMid:
			if f.streams {
				return http.StatusOK
			}
		}
		return http.StatusBadGateway
	}

	type result struct {
		status int
		body   []byte
		header http.Header
		err    error
	}
	do := func(f forwarder) result {
		req, _ := http.NewRequest(f.method, b.URL+f.path, strings.NewReader(f.body))
		req.Header.Set("Authorization", "Bearer "+token)
		c := &http.Client{Transport: b.Client.Transport, Timeout: 20 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, body: body, header: resp.Header, err: err}
	}
	// run sends every forwarder's request at once, with the upstream
	// playing fault, and checks each answer.
	run := func(t *testing.T, fault string) {
		up.set(fault)
		results := make([]result, len(forwarders))
		var wg sync.WaitGroup
		for i, f := range forwarders {
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = do(f) }()
		}
		wg.Wait()
		for i, f := range forwarders {
			r := results[i]
			full := goodBody(f.method, f.upstream, f.body)
			status := want(fault, f)
			switch {
			case fault == faultResetsMid && f.name == "fountain" && (r.status == http.StatusBadGateway || r.status == 0 && r.err != nil):
				// Fountain's short answer is cut within the last bytes the
				// key's scan holds back (six times the key's length, for its
				// escaped forms), which a broken stream drops: nothing of it
				// was passed on, so the box is refused 502 (or, where its
				// header had gone out first, sees the connection end), never
				// an answer it could take for a whole one.
				if typ, msg := brokertest.Refusal(r.body); r.status == http.StatusBadGateway && (typ == "" || !strings.Contains(msg, names[f.name])) {
					t.Errorf("%s with an upstream that %s: answer %.200s, want a refusal naming the %s", f.name, fault, r.body, names[f.name])
				}
			case r.status != status:
				t.Errorf("%s with an upstream that %s = %d %v %.200s, want %d", f.name, fault, r.status, r.err, r.body, status)
			case status != 200:
				if typ, msg := brokertest.Refusal(r.body); typ == "" || !strings.Contains(msg, names[f.name]) || r.err != nil {
					t.Errorf("%s with an upstream that %s: answer %.200s (%v), want a refusal naming the %s", f.name, fault, r.body, r.err, names[f.name])
				}
			case fault == faultResetsMid:
				if r.err == nil || !bytes.HasPrefix(full, r.body) || len(r.body) >= len(full) {
					t.Errorf("%s with an upstream that %s: got %d of %d bytes, read error %v; want the first half, then an error", f.name, fault, len(r.body), len(full), r.err)
				}
			case f.name == "decide":
				if !bytes.Contains(r.body, []byte(`"answers"`)) || r.err != nil {
					t.Errorf("%s with an upstream that %s = %.200s (%v), want an answer", f.name, fault, r.body, r.err)
				}
			case !bytes.Equal(r.body, full) || r.err != nil:
				t.Errorf("%s with an upstream that %s: got %d of %d bytes (%v), want all of them", f.name, fault, len(r.body), len(full), r.err)
			}
			var all bytes.Buffer
			r.header.Write(&all)
			all.Write(r.body)
			for _, v := range []string{anthropicKey, fountainKey, secretValue, up.addr} {
				if bytes.Contains(all.Bytes(), []byte(v)) {
					t.Errorf("%s with an upstream that %s: the answer carries %q", f.name, fault, v)
				}
			}
		}
	}

	// Warm up, then count goroutines with no connection open anywhere.
	run(t, faultOK)
	settle := func() int {
		up.set(faultOK)
		b.Client.CloseIdleConnections()
		runtime.GC()
		return runtime.NumGoroutine()
	}
	before := settle()
	faults := []string{faultDown, faultHangsUp, faultGarbage, faultResets, faultHangs, faultResetsMid, faultSlow, faultCutEarly}
	for round := 0; round < rounds; round++ {
		for _, fault := range faults {
			t.Run(fmt.Sprintf("%s/%d", strings.ReplaceAll(fault, " ", "_"), round), func(t *testing.T) { run(t, fault) })
		}
	}
	// Connections' goroutines end as their real sockets close, which no
	// synctest bubble can hold and no event announces: so this polls the
	// count, for at most 5 s.
	after := settle()
	for deadline := time.Now().Add(5 * time.Second); after > before+5 && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(50 * time.Millisecond)
	}
	requests := rounds * len(faults) * len(forwarders)
	if after > before+5 {
		t.Errorf("goroutines: %d before, %d after %d requests to a failing upstream", before, after, requests)
	}
	t.Logf("goroutines: %d before, %d after %d requests to a failing upstream", before, after, requests)

	l := logs.String()
	for _, v := range []string{anthropicKey, fountainKey, secretValue, token} {
		if strings.Contains(l, v) {
			t.Errorf("the logs carry %.20s…", v)
		}
	}
	// A stream cut off upstream is logged through the broker's logger
	// too, not on bare stderr.
	if !strings.Contains(l, "egress: request failed") || !strings.Contains(l, "proxy: upstream failed") ||
		!strings.Contains(l, "read error during body copy") {
		t.Errorf("the failures were not logged: %.400s", l)
	}
}
