package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// cloudHello is what each cloud stand-in's answers say.
var cloudHello = map[string]string{"bedrock": "Hello from Bedrock.", "vertex": "Hello from Vertex."}

// claudeCodeModels are the models the pinned Claude Code names, with the
// ids its own table gives for each cloud (its provider_ids), mapped in
// the credential's "models" (which come before boxbroker's built-in
// table), as docs/cloud.md says.
var claudeCodeModels = map[string]map[string]string{
	"bedrock": {
		"claude-opus-5-5":   "us.anthropic.claude-opus-5-5",
		"claude-sonnet-5-5": "us.anthropic.claude-sonnet-5-5",
		"claude-haiku-5-5":  "us.anthropic.claude-haiku-5-5",
	},
	"vertex": {
		"claude-opus-5-5":   "claude-opus-5-5",
		"claude-sonnet-5-5": "claude-sonnet-5-5",
		"claude-haiku-5-5":  "claude-haiku-5-5",
	},
}

// setupCloud starts a stand-in of kind (cloudtest) whose account maps
// models, and a broker whose shared Anthropic credential is that account, its outbound
// transport trusting the stand-in's certificate with verification on,
// and enrols a box whose declaration lists inference agent.
func setupCloud(t *testing.T, kind string, models map[string]string) (*brokertest.Broker, string, *cloudtest.Cloud) {
	t.Helper()
	c := cloudtest.New(t, kind, models)
	tr := c.Transport()
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
	b.SetCredential("anthropic", c.Sealed)
	token := b.AddBox("e2e")
	b.Report(token, brokertest.Entry(protocol.Inference, "agent"))
	return b, token, c
}

// checkCloud holds a run paid through a cloud to the broker's promises:
// nothing reached the Anthropic API, the stand-in refused nothing (every
// signature or access token was good), every model call carried the
// broker's own Authorization and no x-api-key, and the box's token is
// nowhere in what the cloud received.
func checkCloud(t *testing.T, b *brokertest.Broker, c *cloudtest.Cloud, token string) {
	t.Helper()
	if n := len(b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API got %d calls paid with a %s account, want none", n, c.Kind)
	}
	if n := c.Refused(); n != 0 {
		t.Errorf("the %s stand-in refused %d requests, want none", c.Kind, n)
	}
	seen := c.Recorder.Seen()
	if len(seen) == 0 {
		t.Fatalf("nothing reached the %s stand-in", c.Kind)
	}
	for _, s := range seen {
		if s.Header.Get("X-Api-Key") != "" {
			t.Errorf("%s %s: the cloud got an x-api-key", s.Method, s.Path)
		}
		if s.Path != "/token" && !strings.HasPrefix(s.Header.Get("Authorization"), c.Authorization()) {
			t.Errorf("%s %s: Authorization is not the broker's own", s.Method, s.Path)
		}
		var all bytes.Buffer
		_ = s.Header.Write(&all)
		all.WriteString(s.Path + "?" + s.RawQuery + "\n")
		all.Write(s.Body)
		if strings.Contains(all.String(), token) {
			t.Errorf("%s %s: the cloud received the box's token", s.Method, s.Path)
		}
	}
}

// streamed reports whether a streamed model call reached the cloud whose
// body holds what.
func streamed(c *cloudtest.Cloud, what string) bool {
	for _, s := range c.Recorder.Seen() {
		if (strings.HasSuffix(s.Path, "/invoke-with-response-stream") || strings.HasSuffix(s.Path, ":streamRawPredict")) && strings.Contains(string(s.Body), what) {
			return true
		}
	}
	return false
}

// TestTypeScriptSDK_ThroughBedrock runs e2e/node/cloud.mjs, the pinned
// TypeScript SDK unchanged, through a broker paying with an Amazon
// Bedrock account.
func TestTypeScriptSDK_ThroughBedrock(t *testing.T) { testTypeScriptSDKThroughCloud(t, "bedrock") }

// TestTypeScriptSDK_ThroughVertex is the same with a Google Vertex AI
// service account.
func TestTypeScriptSDK_ThroughVertex(t *testing.T) { testTypeScriptSDKThroughCloud(t, "vertex") }

func testTypeScriptSDKThroughCloud(t *testing.T, kind string) {
	needNode(t)
	installed := npmInstall(t, "node", "@anthropic-ai/sdk/package.json")
	b, token, c := setupCloud(t, kind, nil)

	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "cloud.mjs")
	cmd.Dir = installed
	cmd.Env = cleanEnv(t, "BROKER_ANTHROPIC_URL="+b.URL+protocol.PrefixAnthropic, "AGENT_TOKEN="+token)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	results := map[string]line{}
	lines := readLines(t, strings.NewReader(stdout.String()), func(l line) { results[l.str("case")] = l })
	if err != nil {
		t.Fatalf("node cloud.mjs: %v\nstdout: %v\nstderr: %s", err, lines, stderr.String())
	}
	if _, ok := results["done"]; !ok {
		t.Fatalf("node cloud.mjs did not finish: %v\nstderr: %s", lines, stderr.String())
	}
	want := cloudHello[kind]

	var msg struct {
		Text         string
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	decode(t, results["messages"], &msg)
	if msg.Text != want || msg.InputTokens != 12 || msg.OutputTokens != 6 {
		t.Errorf("messages = %+v, want %q with usage 12/6", msg, want)
	}

	var stream struct {
		Types        []string
		Text         string
		OutputTokens int `json:"output_tokens"`
	}
	decode(t, results["stream"], &stream)
	wantTypes := "message_start,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(stream.Types, ",") != wantTypes || stream.Text != want || stream.OutputTokens != 6 {
		t.Errorf("stream = %+v, want events %s saying %q", stream, wantTypes, want)
	}
	if !streamed(c, "say hi through the cloud") {
		t.Errorf("no streamed call reached the cloud")
	}

	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	decode(t, results["count_tokens"], &count)
	if count.InputTokens != 12 {
		t.Errorf("count_tokens = %d, want 12", count.InputTokens)
	}

	var models struct {
		OK         bool
		BadRequest bool `json:"badRequest"`
		Status     int
		Message    string
	}
	decode(t, results["models"], &models)
	if models.OK || !models.BadRequest || models.Status != http.StatusBadRequest || !strings.Contains(models.Message, cloud.Name(kind)) {
		t.Errorf("models.list = %+v, want a BadRequestError naming %s", models, cloud.Name(kind))
	}

	checkCloud(t, b, c, token)
}

// TestClaudeCode_CompletesAPrompt_ThroughBedrock: `claude -p "say hi"`
// completes, streaming, through a broker paying with an Amazon Bedrock
// account; Claude Code is the same as for the Anthropic API.
func TestClaudeCode_CompletesAPrompt_ThroughBedrock(t *testing.T) {
	testClaudeCodeThroughCloud(t, "bedrock")
}

// TestClaudeCode_CompletesAPrompt_ThroughVertex is the same with a
// Google Vertex AI service account.
func TestClaudeCode_CompletesAPrompt_ThroughVertex(t *testing.T) {
	testClaudeCodeThroughCloud(t, "vertex")
}

func testClaudeCodeThroughCloud(t *testing.T, kind string) {
	needNode(t)
	b, token, c := setupCloud(t, kind, claudeCodeModels[kind])
	out, errOut, other, err := runClaude(t, b, token, "-p", "say hi")
	logTraffic(t, b, c.Recorder.Seen())
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if strings.TrimSpace(out) != cloudHello[kind] {
		t.Errorf("claude -p printed %q, want the %s stand-in's answer", out, kind)
	}
	if !streamed(c, "say hi") {
		t.Errorf("no streamed call carrying the prompt reached the cloud")
	}
	// Claude Code's betas reach the cloud: Vertex AI takes them all in
	// the anthropic-beta header; Bedrock in the body's anthropic_beta,
	// only those of its allow-list (cloud.BedrockBetas), the rest
	// (claude-code-20250219 among them) dropped.
	for _, s := range c.Recorder.Seen() {
		if s.Path == "/token" {
			continue
		}
		var body struct {
			Beta []string `json:"anthropic_beta"`
		}
		_ = json.Unmarshal(s.Body, &body)
		if kind == "vertex" {
			if got := strings.Join(s.Header.Values("Anthropic-Beta"), ","); !strings.Contains(got, "claude-code-20250219") {
				t.Errorf("%s %s: the cloud got betas %q, want Claude Code's (claude-code-20250219 among them)", s.Method, s.Path, got)
			}
			continue
		}
		for _, b := range body.Beta {
			if !slices.Contains(cloud.BedrockBetas, b) {
				t.Errorf("%s %s: Bedrock got beta %q, which is not in its allow-list", s.Method, s.Path, b)
			}
		}
	}
	checkCloud(t, b, c, token)
	if len(other) != 0 {
		t.Errorf("Claude Code tried to reach hosts other than the broker: %v", other)
	}
}
