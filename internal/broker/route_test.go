package broker_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// table is a capability that serves nothing and declares the routes it is
// given.
type table struct {
	name   string
	routes []capability.Route
}

func (c table) Name() string               { return c.name }
func (c table) Prefixes() []string         { return []string{"/" + c.name} }
func (c table) Routes() []capability.Route { return c.routes }
func (c table) Scopes(*http.Request) (capability.Need, bool, error) {
	return capability.Need{}, false, nil
}
func (c table) Serve(http.ResponseWriter, *http.Request, *capability.Call) error { return nil }

// TestNew_RefusesABadRouteTable: a route table the ServeMux cannot serve
// unambiguously, or that reaches past its capability's prefixes, stops
// broker.New, naming the route.
func TestNew_RefusesABadRouteTable(t *testing.T) {
	get := capability.MethodGet
	tests := []struct {
		name string
		caps []capability.Capability
		want string
	}{
		{"outside its prefix", []capability.Capability{table{"cal", []capability.Route{{Pattern: "/other/x", Methods: get}}}},
			`route "/other/x": the pattern lies under none`},
		{"a method in the pattern", []capability.Capability{table{"cal", []capability.Route{{Pattern: "GET /cal/x", Methods: get}}}},
			`route "GET /cal/x": a pattern is a path`},
		{"no methods", []capability.Capability{table{"cal", []capability.Route{{Pattern: "/cal/x"}}}},
			`route "/cal/x": the route names no method`},
		{"the same pattern twice", []capability.Capability{table{"cal", []capability.Route{{Pattern: "/cal/x", Methods: get}, {Pattern: "/cal/x", Methods: get}}}},
			`capability cal: route "/cal/x": `},
		{"patterns the mux cannot tell apart", []capability.Capability{table{"cal", []capability.Route{{Pattern: "/cal/{a}", Methods: get}, {Pattern: "/cal/{b}", Methods: get}}}},
			`capability cal: route "/cal/{b}": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := broker.New(broker.Config{Broker: "lobby", Capabilities: tt.caps})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%s) = %v, want an error containing %q", tt.name, err, tt.want)
			}
		})
	}
}

// TestBroker_PathNoRouteMatchesIsNotFound: a path under a capability's
// prefix that no declared route's pattern matches (a model id holding an
// escaped slash, an empty model id, a path past decide's one route) is
// the protocol's 404 in any method, never a 405, and reaches no upstream.
func TestBroker_PathNoRouteMatchesIsNotFound(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	box := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-route")
	b.Report(box, brokertest.Entry("inference", "agent", "decide"))
	tests := []struct{ method, path string }{
		{"POST", "/llm/anthropic/v1/models/a%2Fb"},
		{"GET", "/llm/anthropic/v1/models/a%2Fb"},
		{"DELETE", "/llm/anthropic/v1/models/"},
		{"TRACE", "/llm/anthropic/v1/other"},
		{"GET", "/decide/v1/systemone/more"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := b.Do(tt.method, tt.path, box, nil, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s %s = %d %s, want 404", tt.method, tt.path, resp.StatusCode, resp.Body)
			}
			if typ, _ := brokertest.Refusal(resp.Body); typ != protocol.TypeNotFound {
				t.Errorf("%s %s refusal type = %q, want %q", tt.method, tt.path, typ, protocol.TypeNotFound)
			}
		})
	}
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API received %d requests, want none", n)
	}
}

// TestBroker_MethodOnAPathNotServedIsNotFound: a path a route's pattern
// matches but its capability does not serve (a secret name in lower
// case, a fountain path with a dot segment or an empty one) is the
// protocol's 404 in a method the route does not list, as in one it does,
// never a 405 that would tell the box the path is a route.
func TestBroker_MethodOnAPathNotServedIsNotFound(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Fountain: true})
	box := b.AddBox("a")
	b.Report(box, brokertest.Entry("fountain", "agent", "conversations"), brokertest.Entry("egress", "ECHO"))
	tests := []struct{ method, path string }{
		{"TRACE", "/egress/echo/x"},
		{"TRACE", "/fountain/api/conversations/../vaults"},
		{"OPTIONS", "/fountain/api/conversations//x"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := b.Do(tt.method, tt.path, box, nil, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s %s = %d Allow %q, want 404", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"))
			}
			if typ, _ := brokertest.Refusal(resp.Body); typ != protocol.TypeNotFound {
				t.Errorf("%s %s refusal type = %q, want %q", tt.method, tt.path, typ, protocol.TypeNotFound)
			}
		})
	}
	if n := len(b.Fountain.Seen()); n != 0 {
		t.Errorf("Fountain received %d requests, want none", n)
	}
}
