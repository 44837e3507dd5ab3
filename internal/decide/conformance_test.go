package decide_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// TestConformance_Decide runs the conformance suite's inference checks
// against the whole broker, and holds it to the four decide checks.
func TestConformance_Decide(t *testing.T) {
	cfg := conformance.Config{
		Name:         "boxbroker",
		Capabilities: []string{"inference"},
		Start: func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
			u, err := url.Parse(env.Anthropic.URL)
			if err != nil {
				return nil, err
			}
			b := brokertest.New(t, brokertest.Options{Broker: env.Broker, Config: func(c *server.Config) { c.AnthropicURL = u }})
			b.SetCredential("anthropic", env.Anthropic.Credential)
			tokens := map[string]string{}
			for _, box := range env.Boxes {
				tokens[box] = b.AddBox(box)
			}
			return &conformance.Started{URL: b.URL, Tokens: tokens}, nil
		},
	}
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("conformance.Run: %v", err)
	}
	status := map[string]string{}
	for _, r := range rep.Results {
		status[r.ID] = r.Status
	}
	for _, id := range []string{"decide-answers", "decide-refused", "decide-invalid", "decide-unknown-token"} {
		if status[id] != conformance.Passed {
			t.Errorf("check %s = %q, want passed", id, status[id])
		}
	}
	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
}
