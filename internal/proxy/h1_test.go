package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// forwardTo returns a Forwarder to upstream over a fast transport, and
// the transport.
func forwardTo(t *testing.T, upstream string) (*Forwarder, http.RoundTripper) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewFastTransport(TransportOptions{ResponseHeaderTimeout: 2 * time.Second})
	t.Cleanup(tr.(*fastTransport).CloseIdleConnections)
	f := New(func(pr *httputil.ProxyRequest) {
		StripBoxHeaders(pr.Out.Header)
		pr.Out.Header.Set("X-Api-Key", "sk-real")
		Target(pr.Out, u, pr.In.URL.Path, pr.In.URL.RawQuery)
	}, tr, ErrorHandler(discardLogger(), "test upstream"))
	return f, tr
}

func TestFast_ForwardsAndReusesConnections(t *testing.T) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Api-Key") != "sk-real" || r.Header.Get("Authorization") != "" || r.Header.Get("Keep-Alive") != "" || r.Header.Get("X-Named") != "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "keep-alive")
		fmt.Fprintf(w, `{"path":%q,"query":%q,"body":%q,"ua":%q,"len":%d}`, r.URL.Path, r.URL.RawQuery, body, r.Header.Get("User-Agent"), r.ContentLength)
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	for i := 0; i < 20; i++ {
		req, _ := http.NewRequest(http.MethodPost, box.URL+"/v1/messages?beta=true", strings.NewReader(`{"n":`+fmt.Sprint(i)+`}`))
		req.Header.Set("Authorization", "Bearer bbx_box")
		req.Header.Set("User-Agent", "box/1.0")
		req.Header.Set("Connection", "X-Named")
		req.Header.Set("X-Named", "hop")
		req.Header.Set("Keep-Alive", "timeout=5")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf(`{"path":"/v1/messages","query":"beta=true","body":"{\"n\":%d}","ua":"box/1.0","len":%d}`, i, len(fmt.Sprintf(`{"n":%d}`, i)))
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("call %d: %d %s, want 200 %s", i, resp.StatusCode, b, want)
		}
		if resp.Header.Get("Connection") != "" {
			t.Errorf("hop-by-hop Connection header passed back: %q", resp.Header.Get("Connection"))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("upstream saw %d connections for 20 sequential calls, want 1", n)
	}
}

func TestFast_StreamsEachEventAtOnce(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: one\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "event: two\ndata: {}\n\n")
	}))
	defer up.Close()
	defer close(release)
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	resp, err := http.Post(box.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: one\n" {
		t.Fatalf("first line = %q, %v; want the first event while the upstream holds the rest", line, err)
	}
}

func TestFast_StaleKeptConnectionIsNotUsed(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	f, tr := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	post := func() (int, string) {
		resp, err := http.Post(box.URL+"/x", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if c, b := post(); c != 200 || b != "ok" {
		t.Fatalf("first call = %d %q", c, b)
	}
	// The upstream closes its idle connections, as one does after its idle timeout.
	up.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	if c, b := post(); c != 200 || b != "ok" {
		t.Fatalf("call after the upstream closed the kept connection = %d %q, want 200 ok", c, b)
	}
	_ = tr
}

func TestFast_FallsBackForLargeAndChunkedBodies(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, r.TransferEncoding)
	}))
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	big := strings.Repeat("x", FastBodyMax+1)
	resp, err := http.Post(box.URL+"/x", "text/plain", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != fmt.Sprintf("%d []", len(big)) {
		t.Errorf("large body: %q", b)
	}
	// A body of unknown length.
	resp, err = http.Post(box.URL+"/x", "text/plain", io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "6 [chunked]" {
		t.Errorf("chunked body: %q", b)
	}
}

func TestFast_TrailersAndChunkedAnswers(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		fmt.Fprint(w, "part one ")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "part two")
		w.Header().Set("X-Sum", "42")
	}))
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	resp, err := http.Get(box.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "part one part two" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("answer %q trailer %q", b, resp.Trailer.Get("X-Sum"))
	}
}

func TestFast_UpstreamFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		f, _ := forwardTo(t, "http://"+addr)
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("{}")))
		if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "refused") {
			t.Errorf("= %d %s, want 502 refused", rec.Code, rec.Body)
		}
	})
	t.Run("no answer in time", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		u, _ := url.Parse("http://" + ln.Addr().String())
		tr := Fast(NewTransport(TransportOptions{ResponseHeaderTimeout: 100 * time.Millisecond}))
		f := New(func(pr *httputil.ProxyRequest) { Target(pr.Out, u, pr.In.URL.Path, "") }, tr, ErrorHandler(discardLogger(), "test upstream"))
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != http.StatusGatewayTimeout {
			t.Errorf("= %d %s, want 504", rec.Code, rec.Body)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					bufio.NewReader(c).ReadString('\n')
					io.WriteString(c, "SMTP ready\r\n\r\n")
				}()
			}
		}()
		f, _ := forwardTo(t, "http://"+ln.Addr().String())
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != http.StatusBadGateway {
			t.Errorf("= %d %s, want 502", rec.Code, rec.Body)
		}
	})
}

func TestFast_BoxGoingAwayEndsTheUpstreamCall(t *testing.T) {
	gone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: one\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, box.URL+"/x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n')
	cancel()
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's call did not end when the box went away")
	}
	_ = before
}

func TestFast_ConcurrentCalls(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				want := fmt.Sprintf("g%d-i%d-%s", g, i, strings.Repeat("z", i*100))
				resp, err := http.Post(box.URL+"/x", "text/plain", strings.NewReader(want))
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != want {
					errs <- errors.New("answer mixed up: " + string(b[:min(len(b), 20)]))
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestWriteRequest_RefusesBadHeaders(t *testing.T) {
	for _, h := range []http.Header{
		{"X-Bad": {"a\r\nX-Injected: 1"}},
		{"Bad Name": {"v"}},
		{"X-Nul": {"a\x00b"}},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://up/x", nil)
		req.Header = h
		w := bufio.NewWriter(io.Discard)
		if err := writeRequest(w, req, nil); err == nil {
			t.Errorf("writeRequest(%q) = nil, want an error", h)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestFast_AnswerHeadLongerThanTheReadBuffer(t *testing.T) {
	long := strings.Repeat("r", 3*fastReaderSize)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 8; i++ {
			w.Header().Set(fmt.Sprintf("Anthropic-Ratelimit-%d", i), long[:fastReaderSize/2])
		}
		w.Header().Set("X-Long", long)
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	for i := 0; i < 3; i++ {
		resp, err := http.Get(box.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" || resp.Header.Get("X-Long") != long || resp.Header.Get("Anthropic-Ratelimit-7") != long[:fastReaderSize/2] {
			t.Fatalf("call %d: %q, X-Long of %d bytes", i, b, len(resp.Header.Get("X-Long")))
		}
	}
}

func TestForwarder_StreamAfterALargeEventStillFlushesEachEvent(t *testing.T) {
	release := make(chan struct{})
	big := "data: " + strings.Repeat("x", 5*CopyBufferSize) + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, big)
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "event: small\n\n")
		w.(http.Flusher).Flush()
		<-release
	}))
	defer up.Close()
	defer close(release)
	f, _ := forwardTo(t, up.URL)
	box := httptest.NewServer(f)
	defer box.Close()
	resp, err := http.Get(box.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	got := make(chan error, 1)
	go func() {
		want := big + "event: small\n\n"
		b := make([]byte, len(want))
		if _, err := io.ReadFull(br, b); err != nil {
			got <- err
			return
		}
		if string(b) != want {
			got <- errors.New("stream bytes differ")
			return
		}
		got <- nil
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the small event after a large one was held back")
	}
}

// rawUpstream answers each connection's requests with answer(n), n
// counting the requests on that connection, and counts connections.
func rawUpstream(t *testing.T, answer func(n int, req *http.Request) string) (url string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, answer(n, req)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String(), conns
}

func TestFast_Framing(t *testing.T) {
	do := func(t *testing.T, f *Forwarder, method string) (*http.Response, string) {
		t.Helper()
		box := httptest.NewServer(f)
		defer box.Close()
		req, _ := http.NewRequest(method, box.URL+"/x", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	t.Run("a HEAD answer's length is not read as a body", func(t *testing.T) {
		up, conns := rawUpstream(t, func(int, *http.Request) string {
			return "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nX-N: 1\r\n\r\n"
		})
		f, _ := forwardTo(t, up)
		for i := 0; i < 3; i++ {
			resp, body := do(t, f, http.MethodHead)
			if resp.StatusCode != 200 || body != "" || resp.Header.Get("X-N") != "1" {
				t.Fatalf("HEAD %d: %d %q", i, resp.StatusCode, body)
			}
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("%d connections for 3 HEAD calls, want 1", n)
		}
	})
	for _, c := range []struct{ name, answer, why string }{
		{"an answer that says close is not kept", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "answered with close"},
		{"bytes past an answer's length end the connection", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK", "a connection with unasked bytes is not reused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			up, conns := rawUpstream(t, func(int, *http.Request) string { return c.answer })
			f, _ := forwardTo(t, up)
			for i := 0; i < 3; i++ {
				if resp, body := do(t, f, http.MethodGet); resp.StatusCode != 200 || body != "ok" {
					t.Fatalf("call %d: %d %q", i, resp.StatusCode, body)
				}
			}
			if n := conns.Load(); n != 3 {
				t.Errorf("%d connections for 3 calls, want 3: %s", n, c.why)
			}
		})
	}
	t.Run("no content", func(t *testing.T) {
		up, _ := rawUpstream(t, func(int, *http.Request) string { return "HTTP/1.1 204 No Content\r\n\r\n" })
		f, _ := forwardTo(t, up)
		if resp, body := do(t, f, http.MethodGet); resp.StatusCode != 204 || body != "" {
			t.Fatalf("= %d %q", resp.StatusCode, body)
		}
	})
	t.Run("a slow answer is not sent twice", func(t *testing.T) {
		var calls atomic.Int64
		up, _ := rawUpstream(t, func(int, *http.Request) string {
			calls.Add(1)
			time.Sleep(300 * time.Millisecond)
			return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		})
		u, _ := url.Parse(up)
		tr := Fast(NewTransport(TransportOptions{ResponseHeaderTimeout: 50 * time.Millisecond}))
		f := New(func(pr *httputil.ProxyRequest) { Target(pr.Out, u, pr.In.URL.Path, "") }, tr, ErrorHandler(discardLogger(), "test upstream"))
		// A first call leaves a kept connection, so the second is on a reused one.
		if resp, _ := do(t, f, http.MethodGet); resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("first call = %d, want 504", resp.StatusCode)
		}
		if resp, _ := do(t, f, http.MethodGet); resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("second call = %d, want 504", resp.StatusCode)
		}
		time.Sleep(400 * time.Millisecond)
		if n := calls.Load(); n != 2 {
			t.Errorf("the upstream received %d calls for 2, want 2: a timed-out call is never sent again", n)
		}
	})
}

func TestFast_AnswerToNoRequestIsNeverRead(t *testing.T) {
	// After its answer the upstream sends a second one nobody asked for.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
					time.Sleep(20 * time.Millisecond)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged")
				}
			}()
		}
	}()
	f, _ := forwardTo(t, "http://"+ln.Addr().String())
	box := httptest.NewServer(f)
	defer box.Close()
	for i := 0; i < 3; i++ {
		resp, err := http.Get(box.URL + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "first" {
			t.Fatalf("call %d read %q, want the answer to its own request", i, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
