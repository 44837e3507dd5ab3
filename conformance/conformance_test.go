package conformance_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/protocol"
)

// specIDs are the checks of the specification's "Testing a broker" table.
var specIDs = []string{
	"declaration-kept", "declaration-unknown-token", "declaration-malformed", "declaration-listing-spend",
	"unreported-refused", "inference-hello", "inference-forwards", "inference-unknown-route",
	"inference-unknown-token", "inference-agent-refused", "decide-answers", "decide-refused",
	"decide-invalid", "decide-unknown-token", "egress-forwards", "egress-refused", "egress-unheld",
	"egress-bad-name", "feedback-taken", "feedback-refused", "feedback-empty", "fountain-forwards",
	"fountain-refused", "payer-consistent", "token-isolation",
}

// statusOf returns each result's status by id.
func statusOf(rep conformance.Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		out[r.ID] = r.Status
	}
	return out
}

func TestRun_ReferenceBrokerPasses(t *testing.T) {
	rep, err := conformance.Run(t.Context(), referenceConfig(sound))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
	got := statusOf(rep)
	want := append(slices.Clone(specIDs), "extra-calendar-read", "extra-calendar-write")
	for _, id := range want {
		if got[id] != conformance.Passed {
			t.Errorf("check %s = %q, want passed", id, got[id])
		}
	}
	if len(rep.Results) != len(want) {
		t.Errorf("ran %d checks, want %d", len(rep.Results), len(want))
	}
	if last := rep.Results[len(rep.Results)-1].ID; last != "token-isolation" {
		t.Errorf("the last check is %s, want token-isolation", last)
	}
}

func TestRunTest_ReferenceBroker(t *testing.T) {
	conformance.RunTest(t, referenceConfig(sound))
}

func TestRun_BrokenBrokersFail(t *testing.T) {
	tests := []struct {
		name string
		flaw flaw
		want []string // the checks that must fail, and no others
	}{
		{"grants every scope", grantsEveryScope, []string{
			"unreported-refused", "inference-agent-refused", "decide-refused", "egress-refused",
			"feedback-refused", "fountain-refused", "extra-calendar-read", "extra-calendar-write",
		}},
		{"forwards the box's token", forwardsToken, []string{
			"inference-forwards", "decide-answers", "egress-forwards", "fountain-forwards", "token-isolation",
		}},
		{"decides without the model", decidesWithoutModel, []string{"decide-answers"}},
		{"answers a question with the wrong type", answersWrongType, []string{"decide-answers"}},
		{"sends the egress value to another host", egressElsewhere, []string{"egress-forwards"}},
		{"leaves the egress value in the echoed header", egressKeepsValue, []string{"egress-forwards", "token-isolation"}},
		{"says two payers", payerDisagrees, []string{"payer-consistent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := conformance.Run(t.Context(), referenceConfig(tt.flaw))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Status == conformance.Failed {
					failed = append(failed, r.ID)
				}
			}
			slices.Sort(failed)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(failed, want) {
				t.Errorf("failed checks = %q, want %q\nproblems:\n%s", failed, want, joinLines(rep.Problems))
			}
			if len(rep.Problems) == 0 {
				t.Errorf("Report.Problems is empty for a failing broker")
			}
		})
	}
}

func joinLines(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func TestRun_SkipsUnservedCapabilities(t *testing.T) {
	cfg := referenceConfig(sound)
	cfg.Capabilities = nil // inference, egress and feedback, as studio's lobby
	cfg.Extra = nil
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := statusOf(rep)
	for _, id := range specIDs {
		want := conformance.Passed
		if id == "fountain-forwards" || id == "fountain-refused" {
			want = conformance.Skipped
		}
		if got[id] != want {
			t.Errorf("check %s = %q, want %q", id, got[id], want)
		}
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems: %q", rep.Problems)
	}
}

func TestRun_RefusesUnusableConfig(t *testing.T) {
	start := startReference(sound)
	tests := []struct {
		name string
		cfg  conformance.Config
	}{
		{"no Start", conformance.Config{Name: "none"}},
		{"an unknown standard capability", conformance.Config{Start: start, Capabilities: []string{"calendar"}}},
		{"a probe outside its prefix", conformance.Config{Start: start, Extra: []conformance.Extra{{
			Name: "calendar", Prefix: "/calendar/", Probes: map[string]conformance.Probe{"read": {Path: "/elsewhere"}},
		}}}},
		{"Start fails", conformance.Config{Start: func(context.Context, conformance.Env) (*conformance.Started, error) {
			return nil, errors.New("no broker here")
		}}},
		{"a box without a token", conformance.Config{Start: func(context.Context, conformance.Env) (*conformance.Started, error) {
			return &conformance.Started{URL: "http://127.0.0.1:1", Tokens: map[string]string{conformance.BoxReporting: "t"}}, nil
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := conformance.Run(t.Context(), tt.cfg); err == nil {
				t.Errorf("Run(%s) = nil error, want one", tt.name)
			}
		})
	}
}

func TestRun_GivesStartTheEnv(t *testing.T) {
	var got conformance.Env
	cfg := referenceConfig(sound)
	cfg.Broker = "conformance-house"
	inner := cfg.Start
	cfg.Start = func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		got = env
		return inner(ctx, env)
	}
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems with broker word %q: %q", cfg.Broker, rep.Problems)
	}
	if got.Broker != "conformance-house" {
		t.Errorf("Env.Broker = %q, want %q", got.Broker, "conformance-house")
	}
	if !slices.Equal(got.Boxes, []string{conformance.BoxReporting, conformance.BoxSilent}) {
		t.Errorf("Env.Boxes = %q", got.Boxes)
	}
	if len(got.Secrets) != 1 || got.Secrets[0].Name != conformance.SecretName || got.Secrets[0].Box != conformance.BoxReporting ||
		got.Secrets[0].Value == "" || got.Secrets[0].Host == "" {
		t.Errorf("Env.Secrets = %+v, want CONFORMANCE for conformance-a", got.Secrets)
	}
	for _, u := range []conformance.Upstream{got.Anthropic, got.Fountain} {
		if u.URL == "" || u.Credential == "" {
			t.Errorf("upstream %+v lacks a URL or credential", u)
		}
	}
	if !protocol.IsCapabilityName(conformance.BoxReporting) || !protocol.IsCapabilityName(conformance.BoxSilent) {
		t.Errorf("box names are not names")
	}
}

func TestSchema_IsTheProtocolsSchema(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "testdata", "broker-protocol.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(conformance.Schema(), want) {
		t.Errorf("conformance/schema/broker-protocol.schema.json differs from testdata/broker-protocol.schema.json; copy it again")
	}
}
