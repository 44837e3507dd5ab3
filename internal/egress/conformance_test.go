package egress_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// TestEgress_Conformance runs the protocol's conformance suite against
// boxbroker for egress: egress-forwards, egress-refused, egress-unheld,
// egress-bad-name, and the egress part of unreported-refused and
// token-isolation. (The whole broker's run belongs with the capability
// table, once every capability has landed.)
func TestEgress_Conformance(t *testing.T) {
	conformance.RunTest(t, conformance.Config{
		Name:         "boxbroker",
		Capabilities: []string{protocol.Egress},
		Start: func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
			anthropic, err := url.Parse(env.Anthropic.URL)
			if err != nil {
				return nil, err
			}
			br := brokertest.New(t, brokertest.Options{Broker: env.Broker, Config: func(c *server.Config) { c.AnthropicURL = anthropic }})
			br.SetCredential(payer.SharedAnthropic, env.Anthropic.Credential)
			tokens := map[string]string{}
			for _, box := range env.Boxes {
				tokens[box] = br.AddBox(box)
			}
			for _, s := range env.Secrets {
				br.SetSecret(s.Box, s.Name, s.Host, s.Value)
			}
			return &conformance.Started{URL: br.URL, Tokens: tokens}, nil
		},
	})
}
