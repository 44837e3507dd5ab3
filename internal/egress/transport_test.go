package egress_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// lateHost is a secret's host that answers the first request on each
// connection twice: once at once, and again, late, when the next request
// on that connection arrives, in its place. Each answer repeats the path
// and the Authorization of the first request.
type lateHost struct {
	*httptest.Server
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newLateHost(t *testing.T) *lateHost {
	t.Helper()
	lh := &lateHost{}
	lh.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		lh.mu.Lock()
		lh.conns = append(lh.conns, conn)
		lh.mu.Unlock()
		defer conn.Close()
		first := "answer to " + r.URL.Path + " for " + r.Header.Get("Authorization")
		if answer(brw, first) != nil {
			return
		}
		// The late answer goes out as the next request on this
		// connection arrives, which it is then read as.
		if _, err := http.ReadRequest(brw.Reader); err != nil {
			return
		}
		_ = answer(brw, "late "+first)
	}))
	t.Cleanup(func() {
		lh.Close()
		lh.mu.Lock()
		defer lh.mu.Unlock()
		for _, c := range lh.conns {
			c.Close()
		}
	})
	return lh
}

// answer writes a whole 200 answer with body to w.
func answer(w *bufio.ReadWriter, body string) error {
	resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}, "Content-Length": {strconv.Itoa(len(body))}},
		ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
	if err := resp.Write(w); err != nil {
		return err
	}
	return w.Flush()
}

// TestEgress_LateAnswerNeverReachesAnotherBox: a host answers box A's
// request twice, the second answer late, as box B's request to the same
// host goes out. B's request must never travel on A's connection, so B
// never reads A's answer (which holds A's secret value, which B's answer
// is not searched for).
func TestEgress_LateAnswerNeverReachesAnotherBox(t *testing.T) {
	lh := newLateHost(t)
	br := brokertest.New(t, brokertest.Options{})
	type box struct{ name, token, value string }
	boxes := []*box{{name: "alpha"}, {name: "bravo"}}
	for _, b := range boxes {
		b.token = br.AddBox(b.name)
		b.value = "sk_live_" + b.name + "_" + randomHex(16)
		br.SetSecret(b.name, secretName, lh.URL+"/base", b.value)
		br.Report(b.token, brokertest.Entry(protocol.Egress, secretName, "UNHELD"))
	}
	get := func(b *box, path string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, br.URL+"/egress/ECHO"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.token)
		resp, err := br.Client.Do(req)
		if err != nil {
			t.Fatalf("GET %s as %s: %v", path, b.name, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s as %s: read: %v", path, b.name, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s as %s = %d %s, want 200", path, b.name, resp.StatusCode, body)
		}
		return string(body)
	}
	a, b := boxes[0], boxes[1]
	if got, want := get(a, "/a"), "answer to /base/a for Bearer "+a.token; got != want {
		t.Fatalf("box alpha read %q, want %q", got, want)
	}
	got := get(b, "/b")
	if strings.Contains(got, a.value) || strings.Contains(got, "/base/a") {
		t.Errorf("box bravo read box alpha's late answer: %q", got)
	}
	if want := "answer to /base/b for Bearer " + b.token; got != want {
		t.Errorf("box bravo read %q, want %q", got, want)
	}
}
