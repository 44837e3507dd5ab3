package server_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/token"
)

// Modes of a relay.
const (
	relayPass   = "passes"
	relayDrop   = "drops every packet"
	relayRefuse = "refuses connections"
)

// relay is a TCP relay between a broker and PostgreSQL, on loopback, that
// passes bytes, drops them (connections stay open, nothing arrives either
// way: a link that black-holes packets), or refuses (every connection
// closed, new ones reset).
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	mode  string
	conns []net.Conn
	wake  chan struct{} // closed when the mode changes
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target, mode: relayPass, wake: make(chan struct{})}
	go r.accept()
	t.Cleanup(func() { ln.Close(); r.set(relayRefuse) })
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) set(mode string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = mode
	close(r.wake)
	r.wake = make(chan struct{})
	if mode == relayRefuse {
		for _, c := range r.conns {
			c.Close()
		}
		r.conns = nil
	}
}

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		mode := r.mode
		if mode == relayRefuse {
			r.mu.Unlock()
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0) // a reset
			}
			c.Close()
			continue
		}
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		go r.serve(c)
	}
}

func (r *relay) serve(c net.Conn) {
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns = append(r.conns, up)
	r.mu.Unlock()
	go r.pipe(up, c)
	r.pipe(c, up)
}

// pipe copies from src to dst while the relay passes; while it drops,
// what is read is held back, and never delivered.
func (r *relay) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				r.mu.Lock()
				mode, wake := r.mode, r.wake
				r.mu.Unlock()
				if mode == relayPass {
					break
				}
				if mode == relayRefuse {
					return
				}
				<-wake // dropped: wait for the mode to change
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestPostgresCutOff_Answered503: a replica cut off from PostgreSQL,
// silently (every packet dropped) or loudly (connections refused),
// answers each request that needs the store with a 503 and Retry-After
// instead of hanging, and /readyz fails; when the link comes back, it
// serves again. The bound held: every request is answered while the link
// drops packets indefinitely (the client gives up only after 20 s, 100
// times the 200 ms deadline); the test logs the slowest answer.
func TestPostgresCutOff_Answered503(t *testing.T) {
	dsn := postgrestest.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Skipf("the test DSN is not a URL, so no relay can be put in its way: %v", err)
	}
	rl := newRelay(t, u.Host)
	u.Host = rl.addr()
	key := brokertest.MasterKey(t)
	logs := &logBuffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) {
		c.Store = u.String()
		c.MasterKey = key
		c.StoreDeadline = 200 * time.Millisecond
	}})
	b.Client.Timeout = 20 * time.Second
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))

	for _, mode := range []string{relayDrop, relayRefuse} {
		rl.set(mode)
		storeRefused(t, b, "link "+mode, "200ms")
		rl.set(relayPass)
		servedAgain(t, b, tok, "link "+mode)
	}
	// One line an outage, not one a request: a loaded machine may add
	// a brief outage of its own (a call past the deadline as the link
	// comes back), each logged with its end.
	starts := logs.lines("store: not answering; requests that need it get 503 until it does")
	ends := logs.lines("store: answering again")
	if len(starts) < 2 || len(starts) >= 10 || len(ends) > len(starts) || len(ends) < len(starts)-1 {
		t.Errorf("outages logged: %d starts and %d ends for two outages and 10 requests refused; want a start and an end an outage: %v", len(starts), len(ends), starts)
	}
}

// storeRefused checks that while the store is out (fault) every request
// that needs it is answered 503 with Retry-After, within b.Client's
// timeout (the test's bound, far past the deadline), and that /readyz is
// 503 naming the store; it logs the slowest answer.
func storeRefused(t *testing.T, b *brokertest.Broker, fault, deadline string) {
	t.Helper()
	var slowest time.Duration
	for range 5 {
		fresh, _ := token.NewBox() // no box's: the broker must ask the store
		start := time.Now()
		req, _ := http.NewRequest("GET", b.URL+"/llm/anthropic/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+fresh)
		resp, err := b.Client.Do(req)
		if err != nil {
			t.Fatalf("%s: request: %v (hung)", fault, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		slowest = max(slowest, time.Since(start))
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: request = %d (Retry-After %q), want 503 with Retry-After", fault, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	t.Logf("%s: slowest 503 %s (deadline %s)", fault, slowest.Round(time.Millisecond), deadline)
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 503 || !strings.Contains(string(r.Body), `"store":"unavailable"`) {
		t.Errorf("%s: readyz = %d %s, want 503 naming the store", fault, r.StatusCode, r.Body)
	}
}

// servedAgain waits for /readyz to be 200 once the store is back (the
// pool reconnects on its own), then checks that the box tok is served.
func servedAgain(t *testing.T, b *brokertest.Broker, tok, fault string) {
	t.Helper()
	for i := 0; ; i++ {
		if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode == 200 {
			break
		}
		if i == 2000 {
			t.Fatalf("after %s: readyz never 200 again", fault)
		}
	}
	if r := b.Do("GET", "/llm/anthropic/v1/models", tok, nil, nil); r.StatusCode == 503 {
		t.Errorf("after %s: the box's request = 503 %s", fault, r.Body)
	}
}
