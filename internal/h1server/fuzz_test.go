package h1server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

var (
	fuzzOnce sync.Once
	fuzzAddr string
)

// fuzzServer is one server for the fuzz target's whole run: its handler
// reads the body, writes, flushes and sets a trailer, so every path of an
// answer is taken.
func fuzzServer() string {
	fuzzOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		s := New(&http.Server{ReadHeaderTimeout: time.Second, IdleTimeout: time.Second,
			ErrorLog: nil, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
				w.Header().Set("Trailer", "X-T")
				w.Write(b)
				if r.URL.Query().Has("flush") {
					w.(http.Flusher).Flush()
				}
				w.Header().Set("X-T", "t")
			})})
		go s.Serve(ln)
		fuzzAddr = ln.Addr().String()
	})
	return fuzzAddr
}

// FuzzConn sends any bytes on a connection: the server answers or closes
// within its timeouts, and goes on serving the next connection.
func FuzzConn(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("POST /?flush HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"))
	f.Add([]byte("HEAD / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		addr := fuzzServer()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("the server neither answered nor closed: %v", err)
		}
		c.Close()
		// Still serving.
		c, err = net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("after %q: %v %v", raw, resp, err)
		}
	})
}
