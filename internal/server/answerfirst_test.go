package server_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// countingListener counts the bytes written to the connections it accepts.
type countingListener struct {
	net.Listener
	written *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, written: l.written}, nil
}

type countingConn struct {
	net.Conn
	written *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// atLogLine is a log handler that notes, when a Messages call's request
// line comes, how many bytes the box-facing connections had been written.
type atLogLine struct {
	written *atomic.Int64
	lines   chan int64
}

func (h atLogLine) Enabled(context.Context, slog.Level) bool { return true }
func (h atLogLine) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h atLogLine) WithGroup(string) slog.Handler            { return h }
func (h atLogLine) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "path" && a.Value.String() == "/llm/anthropic/v1/messages" {
			h.lines <- h.written.Load()
			return false
		}
		return true
	})
	return nil
}

// TestServe_AnswerOfKnownLengthBeforeTheLogLine: an answer of known
// length is on the box's connection in full before the request's log
// line is written, so the box never waits for the log (net/http's
// server would otherwise hold a small answer in its buffer until the
// handler returns).
func TestServe_AnswerOfKnownLengthBeforeTheLogLine(t *testing.T) {
	var written atomic.Int64
	logs := atLogLine{written: &written, lines: make(chan int64, 1)}
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) {
		o.Logger = slog.New(logs)
	}})
	token := b.AddBox("a")
	b.SetCredential("anthropic", attackKey)
	b.Report(token, brokertest.Entry("inference", "agent"))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: b.Server.Handler}
	go hs.Serve(countingListener{Listener: ln, written: &written})
	t.Cleanup(func() { hs.Close() })

	req, err := http.NewRequest("POST", "http://"+ln.Addr().String()+"/llm/anthropic/v1/messages",
		bytes.NewReader([]byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", token)
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, err %v: %s", resp.StatusCode, err, body)
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		t.Fatalf("Content-Length %q for a body of %d bytes: not an answer of known length", cl, len(body))
	}
	atLog := <-logs.lines
	// The box has read the whole answer: everything written for it is
	// counted. It had all been written when the log line came.
	if all := written.Load(); atLog != all {
		t.Errorf("when the request's log line came, %d of the answer's %d bytes were on the connection; want all", atLog, all)
	}
}
