package broker_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/token"
)

// hostSeen is a stand-in for an egress secret's host that records the
// method of every request it receives.
type hostSeen struct {
	mu      sync.Mutex // guards methods
	methods []string
}

func (h *hostSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.methods = append(h.methods, r.Method)
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (h *hostSeen) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.methods...)
}

// TestBroker_TokenAsMethodIsRefused sends another box's token, a grant
// and an admin token as the HTTP method (each a valid method token) on
// every route of every capability: each is a 405 with an Allow header,
// in the refusal's shape, and reaches no upstream; the audit rows, the
// journal, the log and the admin API keep none of them, and name the
// method OTHER.
func TestBroker_TokenAsMethodIsRefused(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Fountain: true, Logs: logs})
	host := &hostSeen{}
	hs := httptest.NewServer(host)
	t.Cleanup(hs.Close)
	box := b.AddBox("a")
	other := b.AddBox("b")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	b.SetCredential("anthropic", "sk-ant-api03-method")
	b.SetCredential("fountain", "fountain-key-method")
	b.SetSecret("a", "ECHO", hs.URL, "egress_value_method_0123456789")
	b.Report(box, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("fountain", "agent", "conversations"),
		brokertest.Entry("egress", "ECHO"), brokertest.Entry("feedback", "agent", "passive"))
	routes := []struct {
		path, allow string
	}{
		{"/llm/anthropic/v1/messages", "POST"},
		{"/llm/anthropic/v1/messages/count_tokens", "POST"},
		{"/llm/anthropic/v1/models", "GET"},
		{"/llm/anthropic/v1/models/claude-x", "GET"},
		{"/llm/anthropic/api/hello", "GET, HEAD"},
		{protocol.RouteDecide, "POST"},
		{protocol.RouteFeedback, "POST"},
		{protocol.RouteDeclaration, "POST"},
		{"/fountain/api/conversations", "GET, HEAD, POST, PUT, PATCH, DELETE"},
		{"/egress/ECHO/v1/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
	}
	methods := []struct{ name, method string }{
		{"another box's token", other},
		{"a grant", grant},
		{"an admin token", b.AdminToken},
	}
	for _, rt := range routes {
		for _, m := range methods {
			t.Run(rt.path+"/"+m.name, func(t *testing.T) {
				resp := b.Do(m.method, rt.path, box, []byte(`{}`), nil)
				if resp.StatusCode != http.StatusMethodNotAllowed {
					t.Fatalf("%s as the method on %s = %d %s, want 405", m.name, rt.path, resp.StatusCode, resp.Body)
				}
				if got := resp.Header.Get("Allow"); got != rt.allow {
					t.Errorf("Allow = %q, want %q", got, rt.allow)
				}
				if typ, msg := brokertest.Refusal(resp.Body); typ != protocol.TypeInvalid || msg == "" {
					t.Errorf("405 body = %s, want an invalid_request_error refusal", resp.Body)
				}
			})
		}
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API received %d requests, want none", n)
	}
	if n := len(b.Fountain.Seen()); n != 0 {
		t.Errorf("Fountain received %d requests, want none", n)
	}
	if seen := host.seen(); len(seen) != 0 {
		t.Errorf("the egress host received %d requests, want none", len(seen))
	}
	// Refused before any box was known, the 405s are kept as the first
	// on its own and the rest in one tally, as the window ends.
	b.Server.Broker.FlushTally()
	rows := keptNowhere(t, b, logs, other, grant, b.AdminToken)
	refused := 0
	for _, e := range rows {
		if e.Status == http.StatusMethodNotAllowed {
			refused++
			if e.Method != "OTHER" {
				t.Errorf("a 405's audit row names the method %q, want OTHER", e.Method)
			}
			if e.Box == "" && strings.Contains(e.Message, "more requests") && !strings.Contains(e.Message, fmt.Sprintf("%d more requests", len(routes)*len(methods)-1)) {
				t.Errorf("the 405s' tally says %q, want %d more requests", e.Message, len(routes)*len(methods)-1)
			}
		}
	}
	if refused != 2 {
		t.Errorf("audit rows of 405s = %d, want 2 (the first, and the tally of the rest)", refused)
	}
}

// TestBroker_MethodNoRouteServesIsRefused: a method HTTP knows but no
// route of the capability serves (TRACE on egress, PUT on Messages,
// DELETE on models) is a 405 naming what the route serves, and reaches
// no upstream.
func TestBroker_MethodNoRouteServesIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	host := &hostSeen{}
	hs := httptest.NewServer(host)
	t.Cleanup(hs.Close)
	box := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-method")
	b.SetSecret("a", "ECHO", hs.URL, "egress_value_method_0123456789")
	b.Report(box, brokertest.Entry("inference", "agent"), brokertest.Entry("egress", "ECHO"))
	tests := []struct {
		method, path, allow string
	}{
		{"TRACE", "/egress/ECHO/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
		{"PROPFIND", "/egress/ECHO/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
		{"get", "/egress/ECHO/x", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"},
		{"PUT", "/llm/anthropic/v1/messages", "POST"},
		{"DELETE", "/llm/anthropic/v1/models", "GET"},
		{"POST", "/llm/anthropic/api/hello", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := b.Do(tt.method, tt.path, box, nil, nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tt.allow {
				t.Errorf("%s %s = %d Allow %q, want 405 Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), tt.allow)
			}
		})
	}
	if seen := host.seen(); len(seen) != 0 {
		t.Errorf("the egress host received %v, want nothing", seen)
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API received %d requests, want none", n)
	}
}
