package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// start serves h on loopback and returns the address.
func start(t *testing.T, h http.Handler) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(&http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 5 * time.Second})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), s
}

// send writes raw on a new connection to addr, closed at cleanup.
func send(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// exchange writes raw on a new connection and reads n answers.
func exchange(t *testing.T, addr, raw string, methods ...string) ([]*http.Response, []string, net.Conn) {
	t.Helper()
	c := send(t, addr, raw)
	br := bufio.NewReader(c)
	var out []*http.Response
	var bodies []string
	for _, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		for err == nil && resp.StatusCode == http.StatusContinue {
			resp, err = http.ReadResponse(br, &http.Request{Method: m})
		}
		if err != nil {
			t.Fatalf("answer %d: %v", len(out)+1, err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d's body: %v", len(out)+1, err)
		}
		out = append(out, resp)
		bodies = append(bodies, string(b))
	}
	return out, bodies, c
}

func TestKeepAliveAndFraming(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "%s %s %s %q", r.Method, r.Host, r.Header.Get("X-Api-Key"), b)
		case "/big":
			w.Write([]byte(strings.Repeat("b", 10000)))
		case "/flushed":
			w.Write([]byte("one"))
			w.(http.Flusher).Flush()
			w.Write([]byte("two"))
		case "/sniff":
			w.Write([]byte("<html><body>hi</body></html>"))
		case "/empty":
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/length":
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("fi"))
			w.Write([]byte("ve"))
			w.Write([]byte("!"))
			if _, err := w.Write([]byte("?")); err != http.ErrContentLength {
				panic("no ErrContentLength")
			}
		}
	}))
	raw := "POST /small HTTP/1.1\r\nhost: a.example\r\nx-api-key: k1\r\ncontent-length: 5\r\n\r\nhello" +
		"GET /big HTTP/1.1\r\nHost: a\r\n\r\n" +
		"GET /flushed HTTP/1.1\r\nHost: a\r\n\r\n" +
		"GET /sniff HTTP/1.1\r\nHost: a\r\n\r\n" +
		"GET /empty HTTP/1.1\r\nHost: a\r\n\r\n" +
		"GET /nocontent HTTP/1.1\r\nHost: a\r\n\r\n" +
		"HEAD /big HTTP/1.1\r\nHost: a\r\n\r\n" +
		"GET /length HTTP/1.1\r\nHost: a\r\n\r\n"
	resps, bodies, _ := exchange(t, addr, raw, "POST", "GET", "GET", "GET", "GET", "GET", "HEAD", "GET")
	if want := `POST a.example k1 "hello"`; bodies[0] != want || resps[0].ContentLength != int64(len(want)) {
		t.Errorf("small: %q (length %d)", bodies[0], resps[0].ContentLength)
	}
	if resps[0].Header.Get("Date") == "" {
		t.Error("no Date")
	}
	if len(bodies[1]) != 10000 || len(resps[1].TransferEncoding) != 1 {
		t.Errorf("big: %d bytes, %v", len(bodies[1]), resps[1].TransferEncoding)
	}
	if bodies[2] != "onetwo" || len(resps[2].TransferEncoding) != 1 {
		t.Errorf("flushed: %q %v", bodies[2], resps[2].TransferEncoding)
	}
	if ct := resps[3].Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("sniffed %q", ct)
	}
	if resps[4].ContentLength != 0 || bodies[4] != "" {
		t.Errorf("empty: %d %q", resps[4].ContentLength, bodies[4])
	}
	if resps[5].StatusCode != 204 || resps[5].Header.Get("Content-Length") != "" {
		t.Errorf("204: %v", resps[5].Header)
	}
	if resps[6].ContentLength != 10000 || bodies[6] != "" {
		t.Errorf("HEAD: %d %q", resps[6].ContentLength, bodies[6])
	}
	if bodies[7] != "five!" {
		t.Errorf("length: %q", bodies[7])
	}
	for i, r := range resps {
		if r.Close {
			t.Errorf("answer %d closes the connection", i+1)
		}
	}
}

func TestTrailersAndInformational(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Declared")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("X-Late", "not in the head")
		w.Write([]byte("body"))
		w.Header().Set("X-Declared", "d")
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", "u")
	}))
	c := send(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	early, err := http.ReadResponse(br, nil)
	if err != nil || early.StatusCode != 103 || early.Header.Get("Link") == "" {
		t.Fatalf("103: %v %v", early, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "body" || resp.Header.Get("X-Late") != "" || resp.Header.Get("Link") != "" {
		t.Errorf("body %q, head %v", b, resp.Header)
	}
	if resp.Trailer.Get("X-Declared") != "d" || resp.Trailer.Get("X-Undeclared") != "u" {
		t.Errorf("trailers %v", resp.Trailer)
	}
}

func TestCloseAndUnreadBodies(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/split" {
			w.Header().Set("X-Evil", "a\r\nSet-Cookie: x=1")
		}
		w.Write([]byte("ok")) // the body is never read
	}))
	// A small unread body is dropped and the connection kept.
	small := strings.Repeat("s", 1000)
	raw := fmt.Sprintf("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n%sGET /split HTTP/1.1\r\nHost: a\r\n\r\n", len(small), small)
	resps, _, _ := exchange(t, addr, raw, "POST", "GET")
	if resps[0].Close || resps[1].Header.Get("Set-Cookie") != "" || !strings.Contains(resps[1].Header.Get("X-Evil"), "Set-Cookie") {
		t.Errorf("close %v; split head %v", resps[0].Close, resps[1].Header)
	}
	// A large one closes the connection after the answer.
	resps, _, c := exchange(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n"+small, "POST")
	if !resps[0].Close {
		t.Error("a large unread body kept the connection")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("connection still open")
	}
	// Connection: close is honoured.
	resps, _, c = exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", "GET")
	if !resps[0].Close {
		t.Error("no Connection: close")
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after Connection: close, read %v", err)
	}
}

// TestHandOff: what this server does not take, net/http's serves, on the
// same connection, and the connection's later requests too.
func TestHandOff(t *testing.T) {
	var served atomic.Int64
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d %q", r.Proto, r.Method, len(b), r.Header.Get("X-Long"))
	}))
	long := strings.Repeat("l", 6000)
	cases := []struct {
		name, raw, want string
		status          int
	}{
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\n\r\n", `HTTP/1.0 GET 0 ""`, 200},
		{"chunked body", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", `HTTP/1.1 POST 3 ""`, 200},
		{"expect", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi", `HTTP/1.1 POST 2 ""`, 200},
		{"long head", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: " + long + "\r\n\r\n", `HTTP/1.1 GET 0 "` + long + `"`, 200},
		{"no host", "GET / HTTP/1.1\r\n\r\n", "", 400},
		{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "", 400},
		{"bad field", "GET / HTTP/1.1\r\nHost: a\r\nX Bad: 1\r\n\r\n", "", 400},
		{"absolute form", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", `HTTP/1.1 GET 0 ""`, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The case, then an ordinary request on the same connection.
			raw := tc.raw
			methods := []string{"GET"}
			if tc.status == 200 && tc.name != "HTTP/1.0" { // which net/http does not keep
				raw += "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
				methods = append(methods, "GET")
			}
			resps, bodies, _ := exchange(t, addr, raw, methods...)
			if resps[0].StatusCode != tc.status || (tc.want != "" && bodies[0] != tc.want) {
				t.Fatalf("%d %q, want %d %q", resps[0].StatusCode, bodies[0], tc.status, tc.want)
			}
			if len(bodies) > 1 && bodies[1] != `HTTP/1.1 GET 0 ""` {
				t.Errorf("next request: %q", bodies[1])
			}
		})
	}
}

// TestBoxGoneCancels: a box that closes its connection while the handler
// waits cancels the request's context.
func TestBoxGoneCancels(t *testing.T) {
	canceled := make(chan error, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			canceled <- nil
		case <-time.After(5 * time.Second):
			canceled <- errors.New("not canceled")
		}
	}))
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
	} {
		c := send(t, addr, raw)
		time.Sleep(50 * time.Millisecond)
		c.Close()
		if err := <-canceled; err != nil {
			t.Error(err)
		}
	}
}

func TestPanics(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		panic("boom")
	}))
	for _, path := range []string{"/abort", "/boom"} {
		c := send(t, addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if path == "/boom" && len(b) != 0 {
			t.Errorf("%s: an answer after a panic: %q", path, b)
		}
		if path == "/abort" && (!strings.Contains(string(b), "partial") || strings.HasSuffix(string(b), "0\r\n\r\n")) {
			t.Errorf("%s: %q", path, b)
		}
	}
}

func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	addr, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		w.Write([]byte("done"))
	}))
	// An idle connection, and one with a request under way.
	_, _, idle := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
	busy := send(t, addr, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: %v, want it closed", err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Errorf("%q, close %v", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("still accepting")
	}
}

// TestSlowHead: a head that does not arrive within ReadHeaderTimeout ends
// the connection.
func TestSlowHead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(&http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 200 * time.Millisecond})
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read %v, want the server to close", err)
	}
	if time.Since(start) > 4*time.Second {
		t.Error("not closed by the header timeout")
	}
}

// TestEndAnswer: an answer ended before its handler returns reaches the
// box whole (with its length) while the handler still runs, and the
// connection serves the next request after it.
func TestEndAnswer(t *testing.T) {
	read := make(chan struct{})
	late := make(chan error, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("early"))
		if err := w.(interface{ EndAnswer() error }).EndAnswer(); err != nil {
			panic(err)
		}
		if r.URL.Path == "/first" {
			<-read // the box has the whole answer before this returns
			_, err := w.Write([]byte("late"))
			late <- err
		}
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for _, path := range []string{"/first", "/second"} {
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "early" || resp.ContentLength != 5 {
			t.Errorf("%s: %q, length %d", path, b, resp.ContentLength)
		}
		if path == "/first" {
			close(read)
			select {
			case err := <-late:
				if err == nil {
					t.Error("a write after EndAnswer succeeded")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the handler did not go on after EndAnswer")
			}
		}
	}
}

// TestIdleHoldsNoBuffer: keep-alive connections waiting for their next
// request, and a handler waiting with its body read, hold no read buffer.
func TestIdleHoldsNoBuffer(t *testing.T) {
	waiting := make(chan struct{})
	release := make(chan struct{})
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		if r.URL.Path == "/wait" {
			waiting <- struct{}{}
			<-release
		}
		w.Write([]byte("ok"))
	}))
	settled := func(what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for readBuffersHeld.Load() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d read buffers held", what, readBuffersHeld.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := 0; i < 20; i++ {
		exchange(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\nHost: a\r\n\r\n", "POST", "GET")
	}
	settled("20 idle keep-alive connections")
	c := send(t, addr, "POST /wait HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi")
	<-waiting
	settled("a handler waiting")
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
}
