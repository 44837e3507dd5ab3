package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestTypeScriptSDK runs e2e/node/sdk.mjs, the official @anthropic-ai/sdk
// pinned in e2e/node/package-lock.json, against boxbroker.
func TestTypeScriptSDK(t *testing.T) {
	needNode(t)
	installed := npmInstall(t, "node", "@anthropic-ai/sdk/package.json")

	gate := newGatedStream()
	rec := &brokertest.Recorder{Handler: gate}
	b, agent := setup(t, rec, []string{"agent"})
	refused := b.AddBox("e2e-refused")
	b.Report(refused, brokertest.Entry(protocol.Inference, "decide"))

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sdk.mjs")
	cmd.Dir = installed
	cmd.Env = cleanEnv(t,
		"BROKER_ANTHROPIC_URL="+b.URL+protocol.PrefixAnthropic,
		"AGENT_TOKEN="+agent,
		"REFUSED_TOKEN="+refused,
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node sdk.mjs: %v", err)
	}
	results := map[string]line{}
	var refusals []line
	lines := readLines(t, out, func(l line) {
		switch c := l.str("case"); c {
		case "stream-event":
			if l.str("type") == "message_start" {
				close(gate.open) // the client has read message_start: let the stream go on
			}
		case "refused":
			refusals = append(refusals, l)
		default:
			results[c] = l
		}
	})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node sdk.mjs: %v\nstdout: %v\nstderr: %s", err, lines, stderr.String())
	}
	if _, ok := results["done"]; !ok {
		t.Fatalf("node sdk.mjs did not finish: %v\nstderr: %s", lines, stderr.String())
	}

	var msg struct {
		Model, Text, StopReason string
		OutputTokens            int `json:"output_tokens"`
	}
	decode(t, results["messages"], &msg)
	if msg.Text != "Hello from the stand-in." || msg.Model != "claude-sonnet-4-5" || msg.OutputTokens != 6 {
		t.Errorf("messages = %+v, want the stand-in's answer", msg)
	}

	var stream struct {
		Types []string
		Text  string
	}
	decode(t, results["stream"], &stream)
	want := "message_start,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(stream.Types, ",") != want || stream.Text != "Hello from the stand-in." {
		t.Errorf("stream = %+v, want events %s and the stand-in's text", stream, want)
	}
	if got := gate.Opener(); got != "client" {
		t.Errorf("the upstream went on after message_start because of %q, want the client having read it (the answer was buffered)", got)
	}

	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	decode(t, results["count_tokens"], &count)
	if count.InputTokens != 12 {
		t.Errorf("count_tokens = %d, want 12", count.InputTokens)
	}

	var models struct {
		List    []string
		HasMore bool `json:"has_more"`
		Get     string
	}
	decode(t, results["models"], &models)
	if len(models.List) != 1 || models.List[0] != "claude-sonnet-4-5" || models.HasMore || models.Get != "claude-haiku-4-5" {
		t.Errorf("models = %+v", models)
	}

	seen := rec.Seen()
	var paths []string
	for _, s := range seen {
		paths = append(paths, s.Method+" "+s.Path+"?"+s.RawQuery)
	}
	wantPaths := "POST /v1/messages?,POST /v1/messages?,POST /v1/messages/count_tokens?,GET /v1/models?limit=5,GET /v1/models/claude-haiku-4-5?"
	if strings.Join(paths, ",") != wantPaths {
		t.Errorf("upstream saw %v, want %s (and nothing for the refused box)", paths, wantPaths)
	}
	for _, s := range seen {
		if s.Header.Get("X-Stainless-Lang") != "js" {
			t.Errorf("upstream %s: x-stainless-lang = %q, want js (the SDK's headers pass through)", s.Path, s.Header.Get("X-Stainless-Lang"))
		}
	}
	checkUpstream(t, seen, agent)

	d := &protocol.Declaration{Capabilities: []protocol.Capability{brokertest.Entry(protocol.Inference, "decide")}}
	wantMsg := protocol.DeclaredRefusal(d, "lobby", protocol.Inference, "agent")
	if len(refusals) != 4 {
		t.Fatalf("node printed %d refusals, want 4: %v", len(refusals), refusals)
	}
	for _, l := range refusals {
		var r struct {
			Call             string
			OK               bool
			APIError         bool `json:"apiError"`
			PermissionDenied bool `json:"permissionDenied"`
			Status           int
			Type             string
			APIMessage       string `json:"apiMessage"`
			Message          string
			Attempts         int
		}
		decode(t, l, &r)
		if r.OK || !r.APIError || !r.PermissionDenied || r.Status != http.StatusForbidden || r.Type != protocol.TypePermission {
			t.Errorf("%s refused = %+v, want a PermissionDeniedError, 403 permission_error", r.Call, r)
		}
		if r.APIMessage != wantMsg || !namesInferenceAndAgent(r.Message) {
			t.Errorf("%s refused: apiMessage %q, message %q, want %q", r.Call, r.APIMessage, r.Message, wantMsg)
		}
		if r.Attempts != 1 {
			t.Errorf("%s refused after %d attempts with maxRetries 2, want 1 (a 403 is not retried)", r.Call, r.Attempts)
		}
	}
	var atBroker int
	for _, s := range b.Front.Seen() {
		// SDK 1.x sends the API key as a bearer, older ones as x-api-key;
		// the broker takes either.
		if strings.HasPrefix(s.Path, protocol.PrefixAnthropic) && strings.Contains(s.Header.Get("X-Api-Key")+s.Header.Get("Authorization"), refused) {
			atBroker++
		}
	}
	if atBroker != 4 {
		t.Errorf("the broker received %d requests from the refused box, want 4 (one per call, no retry)", atBroker)
	}
}

func decode(t *testing.T, l line, v any) {
	t.Helper()
	if l == nil {
		t.Errorf("the client printed no such result")
		return
	}
	b, _ := json.Marshal(l)
	if err := json.Unmarshal(b, v); err != nil {
		t.Errorf("decode %s: %v", b, err)
	}
}
