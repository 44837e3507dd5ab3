package egressproxy_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// keeper is a secret's host that keeps what it is sent: a POST keeps its
// body and its X-Note header, a GET answers all it has kept.
type keeper struct {
	mu   sync.Mutex // guards kept
	kept []string
}

func (k *keeper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		k.kept = append(k.kept, string(b), r.Header.Get("X-Note"))
		w.WriteHeader(http.StatusCreated)
		return
	}
	io.WriteString(w, strings.Join(k.kept, "\n"))
}

// TestProxy_ValueStoredThroughOneSecretIsRedactedInATunnel is the attack
// on a proxy whose answers are searched only for the value of the secret
// a tunnel's request goes through: the box stores its token at the host
// through /egress/ONE in a header the host keeps (the broker writes
// ONE's value there; it writes none in a body field ONE does not name),
// and reads it
// back through a tunnel to the host, whose request goes through API, the
// other secret pinned there. The tunnel's request is served as
// /egress/API/..., so its answer is searched for ONE's value too.
func TestProxy_ValueStoredThroughOneSecretIsRedactedInATunnel(t *testing.T) {
	k := &keeper{}
	f := newFixtureWith(t, k) // k serves /owner/ on the secret's host
	one := "sv_one_" + strings.Repeat("7", 24)
	f.b.SetSecret("shop", "ONE", "https://"+f.host+"/owner/one", one)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "ONE"))

	if resp := f.b.Do(http.MethodPost, "/egress/ONE/items", f.token, []byte("x"), http.Header{"Content-Type": {"text/plain"}, "X-Note": {"note " + f.token}}); resp.StatusCode != http.StatusCreated {
		t.Fatalf("store through /egress/ONE = %d %s, want 201", resp.StatusCode, resp.Body)
	}
	k.mu.Lock()
	kept := strings.Join(k.kept, "\n")
	k.mu.Unlock()
	if !strings.Contains(kept, one) {
		t.Fatalf("the host kept %q, want ONE's value", kept)
	}

	c := f.client(t, f.token, f.caPool, false)
	req, err := http.NewRequest(http.MethodGet, "https://"+f.host+"/owner/items", nil) // under API's base, not ONE's
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	status, body := send(t, c, req)
	if status != http.StatusOK {
		t.Fatalf("read in the tunnel = %d %s, want 200", status, body)
	}
	if strings.Contains(string(body), one) {
		t.Errorf("the tunnel's answer carries ONE's value: %s", body)
	}
	if !strings.Contains(string(body), "note "+f.token) {
		t.Errorf("the tunnel's answer = %s, want the box's token in the value's place", body)
	}
}
