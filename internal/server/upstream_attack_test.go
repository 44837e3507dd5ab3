package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// The attacks here are an upstream's (an egress host's, or anything
// answering where the Anthropic API should) on the broker's HTTP client,
// and a box's on the upstream's connection. Each upstream is a raw TCP
// listener on loopback, so it can misbehave as no net/http server would.

const attackKey = "sk-ant-api03-ATTACK-0123456789abcdef"

// rawUpstream serves each accepted connection with serve, on loopback,
// until the test ends.
func rawUpstream(t *testing.T, serve func(c net.Conn)) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // guards conns
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				serve(c)
			}()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

// attackBroker starts a broker whose Anthropic upstream is up, with boxes
// a and b reporting agent (and decide), and returns it and their tokens.
func attackBroker(t *testing.T, up *url.URL) (b *brokertest.Broker, a, bb string) {
	t.Helper()
	b = brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.AnthropicURL = up
		c.UpstreamHeaderTimeout = 5 * time.Second
	}})
	a, bb = b.AddBox("a"), b.AddBox("b")
	b.SetCredential("anthropic", attackKey)
	b.Report(a, brokertest.Entry("inference", "agent", "decide"))
	b.Report(bb, brokertest.Entry("inference", "agent", "decide"))
	return b, a, bb
}

const okAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1,"output_tokens":1}}`

// writeAnswer writes a 200 JSON answer with body.
func writeAnswer(w io.Writer, body string) error {
	_, err := fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return err
}

// TestUpstream_PostWrittenIsNeverSentTwice: an upstream that reads a
// Messages call on a reused connection and closes it without a word must
// see that call once, however the box marks it, and the box gets a 502.
// A proxy that resent it would bill one call twice (RFC 9112 §9.3.1).
func TestUpstream_PostWrittenIsNeverSentTwice(t *testing.T) {
	var seen atomic.Int32
	up := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if seen.Add(1) > 1 {
				return // read it whole, then hang up: no answer byte
			}
			if writeAnswer(c, okAnswer) != nil {
				return
			}
		}
	})
	b, token, _ := attackBroker(t, up)
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, nil); resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, resp.Body)
	}
	// Even a call that says it is safe to repeat is not repeated by the
	// broker: that is the box's to decide.
	for i, h := range []http.Header{nil, {"Idempotency-Key": {"k-1"}}} {
		before := seen.Load()
		resp := b.Do("POST", "/llm/anthropic/v1/messages", token, body, h)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("call %d on the reused connection: status %d, want 502: %s", i+2, resp.StatusCode, resp.Body)
		}
		if n := seen.Load() - before; n != 1 {
			t.Errorf("call %d: the upstream received it %d times, want once", i+2, n)
		}
	}
}

// TestUpstream_EndlessAnswerHeaderIsCutOff: an upstream whose answer
// header never ends gets the box a 502, and the broker holds no more of
// it than its bound.
func TestUpstream_EndlessAnswerHeaderIsCutOff(t *testing.T) {
	var sent atomic.Int64
	done := make(chan struct{}) // the upstream has stopped writing
	up := rawUpstream(t, func(c net.Conn) {
		defer close(done)
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: "); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("a"), 4<<10)
		for sent.Load() < 256<<20 { // bounded: 256 MiB at most
			n, err := c.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	b, token, _ := attackBroker(t, up)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`), nil)
	runtime.ReadMemStats(&m1)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %s", resp.StatusCode, resp.Body)
	}
	select { // the broker hung up, so the upstream's writes end
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream is still writing: the broker is still reading the header")
	}
	if sent.Load() < 64<<10 {
		t.Fatalf("the upstream sent %d bytes of header, want more than the 64 KiB bound", sent.Load())
	}
	// Everything this process allocated meanwhile, the broker's share
	// of it included, is far below what the upstream sent.
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 8<<20 {
		t.Errorf("the process allocated %d bytes while the upstream sent %d of header; want under 8 MiB", grew, sent.Load())
	}
}

// TestUpstream_UnsolicitedAnswerReachesNoLaterRequest: an upstream that
// sends an answer nobody asked for on a kept-alive connection, behind the
// real one or later while the connection waits in the pool, must not have
// it taken as the answer to the next request on that connection, which
// may be another box's.
func TestUpstream_UnsolicitedAnswerReachesNoLaterRequest(t *testing.T) {
	for _, idle := range []bool{false, true} {
		name := "behind the real answer"
		if idle {
			name = "while the connection is idle"
		}
		t.Run(name, func(t *testing.T) {
			var conns atomic.Int32
			answered := make(chan struct{}) // box a has its answer
			dropped := make(chan struct{})  // the broker hung up on the planted answer
			up := rawUpstream(t, func(c net.Conn) {
				first := conns.Add(1) == 1
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						if first {
							close(dropped)
						}
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					var out bytes.Buffer
					_ = writeAnswer(&out, okAnswer)
					if first && !idle {
						_ = writeAnswer(&out, `{"planted":"for the next box"}`)
					}
					if _, err := c.Write(out.Bytes()); err != nil {
						return
					}
					if first && idle {
						<-answered
						if writeAnswer(c, `{"planted":"for the next box"}`) != nil {
							return
						}
					}
					if first {
						// Hold the connection open until the broker drops it.
						_, _ = br.Peek(1)
						close(dropped)
						first = false
						return
					}
				}
			})
			b, a, other := attackBroker(t, up)
			body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`)
			if resp := b.Do("POST", "/llm/anthropic/v1/messages", a, body, nil); resp.StatusCode != 200 {
				t.Fatalf("box a: %d %s", resp.StatusCode, resp.Body)
			}
			close(answered)
			// A broker that notices the planted answer hangs up at once;
			// one that does not is given a moment, then box b calls.
			select {
			case <-dropped:
			case <-time.After(500 * time.Millisecond):
			}
			for i := range 3 {
				resp := b.Do("POST", "/llm/anthropic/v1/messages", other, body, nil)
				if strings.Contains(string(resp.Body), "planted") {
					t.Fatalf("box b's call %d got the answer planted on box a's connection: %s", i+1, resp.Body)
				}
				if resp.StatusCode != 200 {
					t.Errorf("box b's call %d: %d %s", i+1, resp.StatusCode, resp.Body)
				}
			}
		})
	}
}

// TestInference_BodyOnGetOrHeadIsRefused: a GET or HEAD carrying a body
// (by length or chunked) on the inference and decide routes is a 400, and
// nothing reaches the upstream, where unread body bytes would stand in
// front of the next box's request.
func TestInference_BodyOnGetOrHeadIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", attackKey)
	b.Report(token, brokertest.Entry("inference", "agent", "decide"))
	smuggled := "GET /v1/models HTTP/1.1\r\nHost: api.anthropic.com\r\nX-Api-Key: " + token + "\r\n\r\n"
	tests := []struct {
		name, method, path string
		chunked            bool
	}{
		{"GET models", "GET", "/llm/anthropic/v1/models", false},
		{"GET models, chunked", "GET", "/llm/anthropic/v1/models", true},
		{"GET a model", "GET", "/llm/anthropic/v1/models/claude-sonnet-4-5", false},
		{"HEAD hello", "HEAD", "/llm/anthropic/api/hello", false},
		{"GET hello, chunked", "GET", "/llm/anthropic/api/hello", true},
		{"GET decide", "GET", "/decide/v1/systemone", false}, // decide serves POST alone: a 405
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(smuggled)
			if tt.chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req, err := http.NewRequest(tt.method, b.URL+tt.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", token)
			resp, err := b.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			rb, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := http.StatusBadRequest
			if tt.path == "/decide/v1/systemone" {
				want = http.StatusMethodNotAllowed
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s with a body = %d %s, want %d", tt.method, tt.path, resp.StatusCode, rb, want)
			}
			var ref protocol.Refusal
			if tt.method != "HEAD" && (json.Unmarshal(rb, &ref) != nil || ref.Type != "error" || ref.Error.Type != protocol.TypeInvalid || ref.Error.Message == "") {
				t.Errorf("%s %s with a body: not an invalid_request_error refusal: %s", tt.method, tt.path, rb)
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the upstream received %d requests, want none", n)
	}
}

// TestInference_UpgradeIsNotCarried: a box asking to switch protocols
// (which would splice its connection to the upstream's, past every
// check of the answer) is forwarded as a plain request, and an upstream
// that switches anyway gets the box a 502.
func TestInference_UpgradeIsNotCarried(t *testing.T) {
	var got atomic.Value
	up := rawUpstream(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		got.Store(req.Header.Clone())
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"+attackKey)
	})
	b, token, _ := attackBroker(t, up)
	resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}})
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502: %s", resp.StatusCode, resp.Body)
	}
	if strings.Contains(string(resp.Body), attackKey) {
		t.Errorf("the answer carries the credential: %s", resp.Body)
	}
	h, _ := got.Load().(http.Header)
	if h == nil {
		t.Fatal("the upstream received nothing")
	}
	if v := h.Get("Upgrade"); v != "" {
		t.Errorf("the upstream received Upgrade: %q, want none", v)
	}
}

// TestInference_InformationalAnswersAreDropped: a 103 from the Anthropic
// upstream, which might repeat anything, is not passed to the box, and
// does not disturb the headers the broker set on the final answer.
func TestInference_InformationalAnswersAreDropped(t *testing.T) {
	up := rawUpstream(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: <"+req.Header.Get("X-Api-Key")+">\r\n\r\n")
		_ = writeAnswer(c, okAnswer)
	})
	b, token, _ := attackBroker(t, up)
	// A raw client, to see every answer on the wire, 1xx included.
	c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	body := `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`
	fmt.Fprintf(c, "POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: broker\r\nX-Api-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", token, len(body), body)
	wire, _ := io.ReadAll(c)
	if bytes.Contains(wire, []byte(attackKey)) || bytes.Contains(wire, []byte("103")) {
		t.Errorf("the box received the informational answer: %q", wire)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(wire)), nil)
	if err != nil {
		t.Fatalf("read answer: %v (%q)", err, wire)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Chant-Payer") == "" {
		t.Errorf("answer %d with chant-payer %q, want 200 with the payer said", resp.StatusCode, resp.Header.Get("Chant-Payer"))
	}
}

// TestInference_EchoedCredentialIsMasked: an upstream (an
// Anthropic-compatible gateway the operator points --anthropic-url at,
// say) that repeats the credential in its answer's body, a JSON answer or
// an event stream, never hands it to the box: it is masked with as many
// asterisks, so the answer keeps its length, and each event still passes
// on as it ends.
func TestInference_EchoedCredentialIsMasked(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "JSON answer"
		if stream {
			name = "event stream"
		}
		t.Run(name, func(t *testing.T) {
			up := rawUpstream(t, func(c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				key := req.Header.Get("X-Api-Key")
				if !stream {
					_ = writeAnswer(c, `{"error":{"message":"key `+key+` echoed"}}`)
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
				for _, ev := range []string{"event: ping\ndata: {\"k\":\"" + key + "\"}\n\n", "event: ping\ndata: {}\n\n"} {
					fmt.Fprintf(c, "%x\r\n%s\r\n", len(ev), ev)
				}
				_, _ = io.WriteString(c, "0\r\n\r\n")
			})
			b, token, _ := attackBroker(t, up)
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			if strings.Contains(string(resp.Body), attackKey) {
				t.Fatalf("the answer carries the credential: %s", resp.Body)
			}
			if !strings.Contains(string(resp.Body), strings.Repeat("*", len(attackKey))) {
				t.Errorf("the credential is not masked in place: %s", resp.Body)
			}
			if cl := resp.Header.Get("Content-Length"); !stream && cl != strconv.Itoa(len(resp.Body)) {
				t.Errorf("Content-Length %q for a body of %d bytes", cl, len(resp.Body))
			}
		})
	}
}

// TestInference_EncodedAnswerIsRefused: an upstream answers gzip (the
// broker asked for no encoding), its body repeating the credential, under
// a first Content-Encoding header of identity or an empty one, so that a
// broker judging the first header alone passes the body to the box
// unread. Every answer whose Content-Encoding is not one identity is a
// 502 that says why.
func TestInference_EncodedAnswerIsRefused(t *testing.T) {
	for _, tt := range []struct{ name, header, says string }{
		{"identity then gzip", "Content-Encoding: identity\r\nContent-Encoding: gzip\r\n", "2 Content-Encoding headers"},
		{"empty then gzip", "Content-Encoding: \r\nContent-Encoding: gzip\r\n", "2 Content-Encoding headers"},
		{"stacked", "Content-Encoding: gzip, br\r\n", "stacked content encodings (gzip, br)"},
		{"gzip", "Content-Encoding: gzip\r\n", "content encoding (gzip)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := rawUpstream(t, func(c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				var body bytes.Buffer
				zw := gzip.NewWriter(&body)
				_, _ = io.WriteString(zw, `{"error":{"message":"key `+req.Header.Get("X-Api-Key")+` echoed"}}`)
				_ = zw.Close()
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", tt.header, body.Len())
				_, _ = c.Write(body.Bytes())
			})
			b, token, _ := attackBroker(t, up)
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`), nil)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(msg, tt.says) {
				t.Errorf("answer %d %q, want 502 saying %q", resp.StatusCode, resp.Body, tt.says)
			}
		})
	}
}
