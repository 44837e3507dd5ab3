package payer_test

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

// TestConformance_PayerConsistentForEachKind runs the conformance suite's
// inference checks against boxbroker with conformance-a paid by each kind
// of payer. For an owner payer the shared credential is a wrong one, so
// the checks that reach the upstream pass only on the owner's.
func TestConformance_PayerConsistentForEachKind(t *testing.T) {
	tests := []struct {
		name, kind, principal string
	}{
		{"shared", protocol.PayerShared, ""},
		{"owner", protocol.PayerOwner, "github:own"},
		{"owner, principal unknown", protocol.PayerOwner, ""},
	}
	want := []string{"payer-consistent", "inference-forwards", "decide-answers", "token-isolation"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			report, err := conformance.Run(context.Background(), conformance.Config{
				Name:         "boxbroker, " + tt.name,
				Capabilities: []string{protocol.Inference},
				Start: func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
					u, err := url.Parse(env.Anthropic.URL)
					if err != nil {
						return nil, err
					}
					b := brokertest.New(t, brokertest.Options{Broker: env.Broker, Config: func(c *server.Config) { c.AnthropicURL = u }})
					tokens := map[string]string{}
					for _, box := range env.Boxes {
						tokens[box] = b.AddBox(box)
					}
					shared := env.Anthropic.Credential
					if tt.kind == protocol.PayerOwner {
						shared = "sk-ant-api03-NOT-THE-PAYER"
						b.SetCredential(payer.OwnerAnthropic(conformance.BoxReporting), env.Anthropic.Credential)
					}
					b.SetCredential(payer.SharedAnthropic, shared)
					box, err := b.Server.Store.Box(ctx, conformance.BoxReporting)
					if err != nil {
						return nil, err
					}
					box.PayerKind, box.PayerPrincipal = tt.kind, tt.principal
					if err := b.Server.Store.UpdateBox(ctx, box); err != nil {
						return nil, err
					}
					if err := b.Server.Cache.Poll(ctx); err != nil {
						return nil, err
					}
					return &conformance.Started{URL: b.URL, Tokens: tokens}, nil
				},
			})
			if err != nil {
				t.Fatalf("conformance.Run = %v", err)
			}
			for _, id := range want {
				found := false
				for _, r := range report.Results {
					if r.ID != id {
						continue
					}
					found = true
					if r.Status != conformance.Passed {
						t.Errorf("%s = %s: %v", id, r.Status, r.Problems)
					}
				}
				if !found {
					t.Errorf("the report has no %s", id)
				}
			}
		})
	}
}
