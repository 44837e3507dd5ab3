package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// The attacks here are a box's on the box-facing listener itself: request
// smuggling (a request whose framing two readers could read differently)
// and pipelining several boxes' requests on one connection.

// rawExchange writes raw on a new connection to b and reads every answer
// until the broker closes the connection or a second passes quiet.
func rawExchange(t *testing.T, b *brokertest.Broker, raw string, answers int) []*http.Response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for len(out) < answers {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		out = append(out, resp)
	}
	return out
}

// TestBoxFacing_SmugglingVariantsAreRefused: a request whose body length
// two HTTP readers could read differently is refused by the box-facing
// server before any handler runs, and nothing reaches the upstream; the
// bytes that would have been a second, smuggled request are never served.
// Where RFC 9112 has one reading (Transfer-Encoding overrides
// Content-Length; an obsolete line fold is a space), the body is read so,
// and what follows it is a request of its own, judged by its own token:
// the smuggled request, which carries none, is refused, and the upstream
// receives the first request alone, with an empty body.
func TestBoxFacing_SmugglingVariantsAreRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", attackKey)
	b.Report(token, brokertest.Entry("inference", "agent"))
	smuggled := "GET /llm/anthropic/v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
	body := "0\r\n\r\n" + smuggled
	head := "POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: broker\r\nX-Api-Key: " + token + "\r\nContent-Type: application/json\r\n"
	tests := []struct {
		name, framing string
		refused       bool // else read as chunked
	}{
		{"two Content-Lengths", "Content-Length: 5\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n", true},
		{"a Content-Length list", "Content-Length: 5, " + strconv.Itoa(len(body)) + "\r\n", true},
		{"chunked, then identity", "Transfer-Encoding: chunked, identity\r\n", true},
		{"identity, then chunked", "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n", true},
		{"chunked in other letters", "Transfer-Encoding: xchunked\r\n", true},
		{"a space before the colon", "Transfer-Encoding : chunked\r\n", true},
		{"a negative length", "Content-Length: -1\r\n", true},
		{"Content-Length and Transfer-Encoding", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", false},
		{"a folded Transfer-Encoding", "Transfer-Encoding:\r\n chunked\r\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(b.Upstream.Seen())
			answers := rawExchange(t, b, head+tt.framing+"\r\n"+body, 2)
			if len(answers) == 0 {
				t.Fatal("no answer")
			}
			seen := b.Upstream.Seen()[before:]
			if tt.refused {
				if answers[0].StatusCode != http.StatusBadRequest && answers[0].StatusCode != http.StatusNotImplemented {
					t.Errorf("first answer %d, want 400 (or 501 for an unknown coding)", answers[0].StatusCode)
				}
				if len(answers) > 1 {
					t.Errorf("%d answers: the smuggled request was served (%d)", len(answers), answers[1].StatusCode)
				}
				if len(seen) != 0 {
					t.Errorf("the upstream received %d requests, want none", len(seen))
				}
				return
			}
			if len(answers) != 2 || answers[1].StatusCode != http.StatusForbidden {
				t.Errorf("%d answers, want the first served and the second, which carries no token, refused (403)", len(answers))
			}
			if len(seen) != 1 || len(seen[0].Body) != 0 {
				t.Errorf("the upstream received %d requests, want the first alone, with an empty body", len(seen))
			}
		})
	}
}

// TestBoxFacing_PipelinedBoxesAreEachTheirOwn: requests of two boxes,
// and one with no token, pipelined on one connection, are each judged by
// their own token and answered in order: box b's report does not allow
// agent, so its call is refused between two calls of box a that are
// served, the call with no token is refused (and the connection closed,
// its body unread), and the upstream receives exactly a's two calls,
// each with the credential and no token.
func TestBoxFacing_PipelinedBoxesAreEachTheirOwn(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	a, other := b.AddBox("a"), b.AddBox("b")
	b.SetCredential("anthropic", attackKey)
	b.Report(a, brokertest.Entry("inference", "agent"))
	b.Report(other, brokertest.Entry("inference", "decide"))
	call := func(token string) string {
		body := `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
		h := "POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
		if token != "" {
			h += "X-Api-Key: " + token + "\r\n"
		}
		return h + "\r\n" + body
	}
	answers := rawExchange(t, b, call(a)+call(other)+call(a)+call(""), 4)
	want := []int{200, 403, 200, 403}
	if len(answers) != len(want) {
		t.Fatalf("%d answers, want %d", len(answers), len(want))
	}
	for i, resp := range answers {
		if resp.StatusCode != want[i] {
			body, _ := io.ReadAll(resp.Body)
			t.Errorf("answer %d = %d %s, want %d", i+1, resp.StatusCode, body, want[i])
		}
	}
	seen := b.Upstream.Seen()
	if len(seen) != 2 {
		t.Fatalf("the upstream received %d calls, want box a's 2", len(seen))
	}
	for _, s := range seen {
		if s.Header.Get("X-Api-Key") != attackKey {
			t.Errorf("an upstream call carried x-api-key %q, want the credential", s.Header.Get("X-Api-Key"))
		}
		for k, vs := range s.Header {
			for _, v := range vs {
				if strings.Contains(v, a) || strings.Contains(v, other) {
					t.Errorf("an upstream call carried a box's token in %s", k)
				}
			}
		}
	}
}
