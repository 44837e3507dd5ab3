package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
)

// size returns how many pools p holds.
func (p *pools) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lru.Len()
}

// TestPools_NoTwoBoxesShareATransport: each box, and each of its
// secrets, has a transport of its own, kept for its next request.
func TestPools_NoTwoBoxesShareATransport(t *testing.T) {
	p := newPools(proxy.TransportOptions{})
	a, b := p.get(poolKey{"alpha", "ECHO"}), p.get(poolKey{"bravo", "ECHO"})
	if a == b {
		t.Errorf("boxes alpha and bravo share a transport for ECHO")
	}
	if p.get(poolKey{"alpha", "OTHER"}) == a {
		t.Errorf("box alpha's secrets ECHO and OTHER share a transport")
	}
	if p.get(poolKey{"alpha", "ECHO"}) != a {
		t.Errorf("box alpha's second request for ECHO has a new transport, want the first one's")
	}
	if n := p.size(); n != 3 {
		t.Errorf("pools hold %d transports, want 3", n)
	}
}

// TestPools_AreBounded: many boxes never hold more than max pools, and
// a pool unused for longer than idle is dropped; a dropped pool's idle
// connections are closed.
func TestPools_AreBounded(t *testing.T) {
	closed := make(chan struct{}, 16)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	target, _ := url.Parse(srv.URL)

	now := time.Unix(1_700_000_000, 0)
	p := newPools(proxy.TransportOptions{})
	p.max, p.idle, p.now = 3, time.Minute, func() time.Time { return now }
	defer p.CloseIdleConnections()

	// The first box's request leaves an idle connection in its pool.
	f := &flight{box: "box-0", name: "ECHO", target: target, addr: dialAddr(target)}
	req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), ctxKey{}, f), http.MethodGet, srv.URL, nil)
	resp, err := p.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	first := p.get(poolKey{"box-0", "ECHO"})

	for i := 1; i < 10; i++ {
		p.get(poolKey{"box-" + strconv.Itoa(i), "ECHO"})
		if n := p.size(); n > p.max {
			t.Fatalf("after %d boxes pools hold %d transports, want at most %d", i+1, n, p.max)
		}
	}
	// box-0's pool was the least recently used: dropped, its connection closed.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatalf("box-0's pool was dropped but its idle connection is still open")
	}
	if p.get(poolKey{"box-0", "ECHO"}) == first {
		t.Errorf("box-0's pool outlived %d newer ones, want it dropped", p.max)
	}

	// Unused for longer than idle, every pool but the one asked for goes.
	now = now.Add(p.idle + time.Second)
	p.get(poolKey{"box-new", "ECHO"})
	if n := p.size(); n != 1 {
		t.Errorf("after %v unused pools hold %d transports, want 1", p.idle, n)
	}
	// Within idle, they stay.
	now = now.Add(p.idle / 2)
	p.get(poolKey{"box-other", "ECHO"})
	if n := p.size(); n != 2 {
		t.Errorf("pools used within %v hold %d transports, want 2", p.idle, n)
	}
}

// TestPools_RequestWithNoBoxIsRefused: a request whose flight names no
// box is never sent.
func TestPools_RequestWithNoBoxIsRefused(t *testing.T) {
	p := newPools(proxy.TransportOptions{})
	for _, ctx := range []context.Context{context.Background(), context.WithValue(context.Background(), ctxKey{}, &flight{name: "ECHO"})} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
		if _, err := p.RoundTrip(req); err != errElsewhere {
			t.Errorf("RoundTrip with no box = %v, want errElsewhere", err)
		}
	}
	if n := p.size(); n != 0 {
		t.Errorf("pools hold %d transports after refusals, want 0", n)
	}
}
