package upstreamtest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
)

// EchoStatus starts, on loopback, a hostile upstream that answers each
// request with a status line made of what the request carried: its
// Authorization and X-Api-Key headers and its raw query, with no HTTP
// version, so that Go's transport fails with an error that quotes the
// line (`malformed HTTP response "…"`). It returns the upstream's
// host:port, and stops when t ends.
func EchoStatus(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s %s %s\r\n\r\n", req.Header.Get("Authorization"), req.Header.Get("X-Api-Key"), req.URL.RawQuery)
			}()
		}
	}()
	return ln.Addr().String()
}
