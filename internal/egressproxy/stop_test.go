package egressproxy_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/proxyca"
)

// TestServe_ReturnsOnceItsHandlersHave: when its context ends, Serve
// closes its connections and returns only once the handlers still
// running have returned (within a bound), so that what they served is
// recorded before serve goes on to close the journal and exit. Here a
// passthrough tunnel's dial notices the end only half a second after
// the proxy has closed everything.
func TestServe_ReturnsOnceItsHandlersHave(t *testing.T) {
	f := newFixture(t)
	srv := f.b.Server
	ca, err := proxyca.Load(t.Context(), srv.Store, srv.Keyring, nil)
	if err != nil {
		t.Fatal(err)
	}
	dialing := make(chan struct{})
	var returned atomic.Bool // the slow dial returned
	p, err := egressproxy.New(egressproxy.Config{
		Broker: srv.Broker, BrokerWord: "lobby", Cache: srv.Cache, Secrets: srv.Store, CA: ca, Passthrough: []string{f.passHost},
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			close(dialing)
			<-ctx.Done()
			time.Sleep(500 * time.Millisecond) // slow to notice; not a bound on anything
			returned.Store(true)
			return nil, ctx.Err()
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan struct{})
	go func() { p.Serve(ctx, ln); close(served) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("box:" + f.token))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", f.passHost, f.passHost, auth)
	go io.Copy(io.Discard, bufio.NewReader(conn))
	select {
	case <-dialing:
	case <-time.After(10 * time.Second):
		t.Fatal("the passthrough tunnel was not dialled within 10 s")
	}
	cancel()
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of its context's end")
	}
	if !returned.Load() {
		t.Error("Serve returned while a tunnel's handler was still running: what it served is recorded after serve closed the journal, or never")
	}
}
