package broker_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// answerBefore is how long a test waits for an answer that must not wait
// for a body: well under broker.BodyTimeout, after which the broker gives
// up on a stalled body anyway.
const answerBefore = broker.BodyTimeout / 3

// sendHead opens a connection to b, writes head (and the start of a body,
// if any) and never more, and returns the answer read within
// answerBefore. The connection is closed when the test ends.
func sendHead(t *testing.T, b *brokertest.Broker, head string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(answerBefore))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within %v while the body is unsent: %v", answerBefore, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestFeedback_UnauthenticatedBodyIsNeverRead: a client with no box's
// token sends the head of a request whose body never comes. The refusal
// arrives at once, while the body is still unsent: the broker checked the
// token from the head alone and read none of the body. So the same head,
// from many connections, holds no memory for a body and no handler for
// BodyTimeout.
func TestFeedback_UnauthenticatedBodyIsNeverRead(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("feedback", "agent"), brokertest.Entry("inference", "agent"))
	tests := []struct {
		name, path, auth, body string
		want                   int
	}{
		{"feedback, no token, chunked", protocol.RouteFeedback, "", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", 403},
		{"feedback, unknown token, chunked", protocol.RouteFeedback, "Authorization: Bearer bbx_unknown\r\n", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", 403},
		{"feedback, unknown token, 1 MiB announced", protocol.RouteFeedback, "Authorization: Bearer bbx_unknown\r\n", "Content-Length: 1048576\r\n\r\n{", 403},
		{"declaration, unknown token, chunked", protocol.RouteDeclaration, "Authorization: Bearer bbx_unknown\r\n", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", 401},
		{"messages, unknown token, chunked", "/llm/anthropic/v1/messages", "x-api-key: bbx_unknown\r\n", "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", 403},
		{"egress, unknown token, announced", "/egress/GITHUB/user", "Authorization: Bearer bbx_unknown\r\n", "Content-Length: 100000\r\n\r\n{", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := sendHead(t, b, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: broker\r\nContent-Type: application/json\r\n%s%s", tt.path, tt.auth, tt.body))
			if resp.StatusCode != tt.want {
				t.Errorf("POST %s with an unsent body = %d, want %d", tt.path, resp.StatusCode, tt.want)
			}
			if !resp.Close {
				t.Errorf("POST %s refused with its body unread keeps the connection open; want it closed", tt.path)
			}
		})
	}
	// A box's own batch is still read and judged by its words.
	if r := b.Do("POST", protocol.RouteFeedback, tok, []byte(`{"counts":{"restarts":1}}`), nil); r.StatusCode != 403 || !strings.Contains(string(r.Body), "passive") {
		t.Errorf("alpha's counts without passive = %d %s, want 403 naming passive", r.StatusCode, r.Body)
	}
}

// TestDeclaration_ChunkedOverLimitIs413AtOnce: a box sends a chunked
// report past protocol.DeclarationMaxBytes and then holds its connection
// open. The 413 arrives while the body is still unfinished, not after
// BodyTimeout.
func TestDeclaration_ChunkedOverLimitIs413AtOnce(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	chunk := strings.Repeat("x", 4096)
	var body strings.Builder
	body.WriteString(`{"capabilities":[],"pad":"`)
	for body.Len() < protocol.DeclarationMaxBytes+len(chunk) {
		body.WriteString(chunk)
	}
	over := body.String()
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: broker\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
		protocol.RouteDeclaration, tok, len(over), over)
	resp := sendHead(t, b, head) // no last chunk: the body never ends
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked report of %d bytes, unfinished = %d, want 413", len(over), resp.StatusCode)
	}
}
