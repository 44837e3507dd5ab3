//go:build unix

package inference_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// A cloud account whose endpoints (a Bedrock or Vertex AI endpoint, an
// sts_endpoint, a service account's token_uri) are named by a name whose
// DNS answers, as the broker connects, with this machine: the call, with
// the account's signature or its signed JWT in it, would go to the
// broker's own listeners (or, answering 169.254.169.254, to the metadata
// service). The server's transport judges each address the cloud's
// requests dial as egress judges a secret's host (proxy.ReachOnly): no
// connection is made, and the box is refused. On the code before, the
// connection was made.
func TestCloud_EndpointNameIsNeverDialledAtThisMachine(t *testing.T) {
	conns, port := upstreamtest.Listening(t, true)
	tests := []struct {
		name, kind string
		role       bool   // the Bedrock account assumes a role at its sts_endpoint
		host       string // the endpoints' host
	}{
		{"bedrock endpoint", "bedrock", false, "cloud.rebind.example"},
		{"bedrock sts_endpoint", "bedrock", true, "cloud.rebind.example"},
		{"vertex token_uri", "vertex", false, "cloud.rebind.example"},
		// Written as an address, the endpoint is reached there: the
		// operator named it (its TLS, unverifiable here, then fails).
		{"bedrock endpoint at an address", "bedrock", false, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cloudtest.New(t, tt.kind, nil)
			raw := c.Credential
			if tt.role {
				raw, _ = c.RoleCredential(t, "", nil)
			}
			raw = strings.ReplaceAll(raw, c.Server.URL, "https://"+tt.host+":"+port)
			tr := proxy.NewTransport(proxy.TransportOptions{Resolver: upstreamtest.FakeDNS(netip.MustParseAddr("127.0.0.1"))})
			b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
			b.SetCredential("anthropic", checkCloud(t, tt.kind, raw))
			token := b.AddBox("a")
			b.Report(token, brokertest.Entry("inference", "agent"))
			before := conns.Load()
			resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil)
			if resp.StatusCode == http.StatusOK {
				t.Errorf("POST /v1/messages = 200, want a refusal")
			}
			n := conns.Load() - before
			if _, err := netip.ParseAddr(tt.host); err == nil {
				if n == 0 {
					t.Errorf("the call made no connection to the endpoint written as %s", tt.host)
				}
				return
			}
			if n != 0 {
				t.Errorf("the call made %d connections to this machine through a name answering 127.0.0.1", n)
			}
		})
	}
}
