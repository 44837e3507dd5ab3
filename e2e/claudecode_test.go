package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// claudeDir holds the pinned @anthropic-ai/claude-code (package-lock.json).
const claudeDir = "claude-code"

// elsewhere is an HTTP(S) proxy Claude Code is pointed at for every host
// but the broker's; it records what tried to leave and refuses it, so a
// test can show the box reached nothing but its broker.
type elsewhere struct {
	mu    sync.Mutex // guards hosts
	hosts []string
}

func (e *elsewhere) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.hosts = append(e.hosts, r.Method+" "+r.Host)
	e.mu.Unlock()
	http.Error(w, "no network here", http.StatusForbidden)
}

func (e *elsewhere) Hosts() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.hosts...)
}

// runClaude runs the pinned Claude Code non-interactively in a fresh
// directory and HOME, as a box runs it: ANTHROPIC_BASE_URL at the broker
// and the box's token as ANTHROPIC_API_KEY (in the environment, never in
// argv), with updates, telemetry and other nonessential traffic off.
func runClaude(t *testing.T, b *brokertest.Broker, token string, args ...string) (stdout, stderr string, other []string, err error) {
	t.Helper()
	needNode(t)
	installed := npmInstall(t, claudeDir, "@anthropic-ai/claude-code/package.json")
	bin := filepath.Join(installed, "node_modules", ".bin", "claude")
	trap := &elsewhere{}
	proxy := httptest.NewServer(trap)
	defer proxy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = cleanEnv(t,
		"ANTHROPIC_BASE_URL="+b.URL+protocol.PrefixAnthropic,
		"ANTHROPIC_API_KEY="+token,
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"HTTPS_PROXY="+proxy.URL,
		"HTTP_PROXY="+proxy.URL,
		"NO_PROXY=127.0.0.1,localhost",
	)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("claude %v did not finish within %v\nstdout: %s\nstderr: %s", args, runTimeout, o.String(), e.String())
	}
	return o.String(), e.String(), trap.Hosts(), err
}

// logTraffic writes down what Claude Code sent the broker and what reached
// the stand-in, for whoever reads the test's -v output.
func logTraffic(t *testing.T, b *brokertest.Broker, seen []brokertest.Seen) {
	t.Helper()
	for _, s := range b.Front.Seen() {
		t.Logf("broker received %s %s?%s", s.Method, s.Path, s.RawQuery)
	}
	for _, s := range seen {
		var body struct {
			Model     string `json:"model"`
			Stream    bool   `json:"stream"`
			MaxTokens int    `json:"max_tokens"`
			Tools     []any  `json:"tools"`
		}
		_ = json.Unmarshal(s.Body, &body)
		t.Logf("upstream received %s %s?%s model=%s stream=%v max_tokens=%d tools=%d beta=%q",
			s.Method, s.Path, s.RawQuery, body.Model, body.Stream, body.MaxTokens, len(body.Tools), s.Header.Get("Anthropic-Beta"))
	}
}

// TestClaudeCode_CompletesAPrompt: `claude -p "say hi"` completes through
// the broker on the operator's credential, the box's token reaching no
// upstream, and Claude Code reaches no host but the broker.
func TestClaudeCode_CompletesAPrompt(t *testing.T) {
	b, token := setup(t, nil, []string{"agent"})
	out, errOut, other, err := runClaude(t, b, token, "-p", "say hi")
	seen := b.Upstream.Seen()
	logTraffic(t, b, seen)
	if err != nil {
		t.Fatalf("claude -p: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if strings.TrimSpace(out) != "Hello from the stand-in." {
		t.Errorf("claude -p printed %q, want the stand-in's answer", out)
	}
	if len(seen) == 0 {
		t.Fatal("no request reached the upstream")
	}
	var prompted bool
	for _, s := range seen {
		if s.Method == http.MethodPost && s.Path == "/v1/messages" && strings.Contains(string(s.Body), "say hi") {
			prompted = true
		}
	}
	if !prompted {
		t.Errorf("no Messages call upstream carried the prompt")
	}
	checkUpstream(t, seen, token)
	if len(other) != 0 {
		t.Errorf("Claude Code tried to reach hosts other than the broker: %v", other)
	}
}

// TestClaudeCode_RefusedWithoutAgent: with agent missing from the box's
// inference scope, Claude Code stops after one request and shows the
// broker's 403 message; nothing reaches the upstream.
func TestClaudeCode_RefusedWithoutAgent(t *testing.T) {
	d := &protocol.Declaration{Capabilities: []protocol.Capability{brokertest.Entry(protocol.Inference, "decide")}}
	want := protocol.DeclaredRefusal(d, "lobby", protocol.Inference, "agent")
	tests := []struct {
		name string
		args []string
		// shown finds the broker's message in what Claude Code printed.
		shown func(stdout, stderr string) (string, bool)
	}{
		{"text", []string{"-p", "say hi"}, func(o, e string) (string, bool) {
			return o + e, strings.Contains(o+e, want)
		}},
		{"json", []string{"-p", "say hi", "--output-format", "json"}, func(o, e string) (string, bool) {
			var r struct {
				IsError bool   `json:"is_error"`
				Status  int    `json:"api_error_status"`
				Result  string `json:"result"`
			}
			if json.Unmarshal([]byte(o), &r) != nil {
				return o, false
			}
			return r.Result, r.IsError && r.Status == http.StatusForbidden && strings.Contains(r.Result, want)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, token := setup(t, nil, []string{"decide"})
			out, errOut, other, err := runClaude(t, b, token, tt.args...)
			logTraffic(t, b, b.Upstream.Seen())
			if err == nil {
				t.Errorf("claude %v exited 0 for a refused box", tt.args)
			}
			shown, ok := tt.shown(out, errOut)
			if !ok {
				t.Errorf("claude %v showed %q, want the broker's message %q", tt.args, shown, want)
			}
			t.Logf("claude %v showed: %s", tt.args, shown)
			var calls int
			for _, s := range b.Front.Seen() {
				if strings.HasPrefix(s.Path, protocol.PrefixAnthropic+"/v1/") {
					calls++
				}
			}
			if calls != 1 {
				t.Errorf("the broker received %d API calls from Claude Code, want 1 (a 403 is shown at once, not retried)", calls)
			}
			if n := len(b.Upstream.Seen()); n != 0 {
				t.Errorf("upstream received %d requests for a refused box, want 0", n)
			}
			if len(other) != 0 {
				t.Errorf("Claude Code tried to reach hosts other than the broker: %v", other)
			}
		})
	}
}
