package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// sdkDefaultRetries is the Go SDK's own default for MaxRetries; the
// refusal tests set it explicitly so they show that a 403 is not retried
// under the settings every SDK user gets.
const sdkDefaultRetries = 2

// attempts counts the HTTP requests the SDK makes, retries included.
type attempts struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (a *attempts) RoundTrip(r *http.Request) (*http.Response, error) {
	a.n.Add(1)
	return a.next.RoundTrip(r)
}

// goClient is the Go SDK configured as a box would be: the broker's
// Anthropic base URL and the box's token as the API key, nothing taken
// from the environment.
func goClient(b *brokertest.Broker, token string) (anthropic.Client, *attempts) {
	a := &attempts{next: http.DefaultTransport}
	c := anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(b.URL+protocol.PrefixAnthropic+"/"),
		option.WithAPIKey(token),
		option.WithHTTPClient(&http.Client{Transport: a}),
		option.WithMaxRetries(sdkDefaultRetries),
	)
	return c, a
}

func hiParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hi through the broker"))},
	}
}

func TestGoSDK_Messages(t *testing.T) {
	b, token := setup(t, nil, []string{"agent"})
	c, _ := goClient(b, token)
	msg, err := c.Messages.New(context.Background(), hiParams())
	if err != nil {
		t.Fatalf("Messages.New: %v", err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the stand-in." || msg.Model != "claude-sonnet-4-5" || msg.Usage.OutputTokens != 6 {
		t.Errorf("Messages.New = %s, want the stand-in's answer", msg.RawJSON())
	}
	seen := b.Upstream.Seen()
	if len(seen) != 1 || seen[0].Method != "POST" || seen[0].Path != "/v1/messages" {
		t.Fatalf("upstream saw %d requests (%v), want one POST /v1/messages", len(seen), seen)
	}
	if !strings.Contains(string(seen[0].Body), "say hi through the broker") {
		t.Errorf("upstream body %s does not hold the prompt", seen[0].Body)
	}
	if v := seen[0].Header.Get("Anthropic-Version"); v == "" {
		t.Errorf("upstream got no anthropic-version header")
	}
	if v := seen[0].Header.Get("X-Stainless-Lang"); v != "go" {
		t.Errorf("upstream x-stainless-lang = %q, want go (the SDK's headers pass through)", v)
	}
	checkUpstream(t, seen, token)
}

func TestGoSDK_StreamEventByEvent(t *testing.T) {
	gate := newGatedStream()
	rec := &brokertest.Recorder{Handler: gate}
	b, token := setup(t, rec, []string{"agent"})
	c, _ := goClient(b, token)
	stream := c.Messages.NewStreaming(context.Background(), hiParams())
	defer stream.Close()
	var types []string
	var acc anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Type, err)
		}
		if ev.Type == "message_start" {
			// The rest of the stream is held upstream until now: the
			// client read this event before the upstream sent another.
			close(gate.open)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("events = %v, want %v", types, want)
	}
	if got := gate.Opener(); got != "client" {
		t.Errorf("the upstream went on after message_start because of %q, want the client having read it (the answer was buffered)", got)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != "Hello from the stand-in." || acc.StopReason != "end_turn" {
		t.Errorf("accumulated message = %s", acc.RawJSON())
	}
	checkUpstream(t, rec.Seen(), token)
}

func TestGoSDK_CountTokens(t *testing.T) {
	b, token := setup(t, nil, []string{"agent"})
	c, _ := goClient(b, token)
	n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))},
	})
	if err != nil {
		t.Fatalf("CountTokens: %v", err)
	}
	if n.InputTokens != 12 {
		t.Errorf("CountTokens = %d input tokens, want 12", n.InputTokens)
	}
	seen := b.Upstream.Seen()
	if len(seen) != 1 || seen[0].Path != "/v1/messages/count_tokens" || !strings.Contains(string(seen[0].Body), "count me") {
		t.Errorf("upstream saw %v, want one count_tokens call with the prompt", seen)
	}
	checkUpstream(t, seen, token)
}

func TestGoSDK_Models(t *testing.T) {
	b, token := setup(t, nil, []string{"agent"})
	c, _ := goClient(b, token)
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{Limit: anthropic.Int(5)})
	if err != nil {
		t.Fatalf("Models.List: %v", err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != "claude-sonnet-4-5" || page.HasMore {
		t.Errorf("Models.List = %s", page.RawJSON())
	}
	m, err := c.Models.Get(context.Background(), "claude-haiku-4-5", anthropic.ModelGetParams{})
	if err != nil {
		t.Fatalf("Models.Get: %v", err)
	}
	if m.ID != "claude-haiku-4-5" {
		t.Errorf("Models.Get(claude-haiku-4-5).ID = %q", m.ID)
	}
	seen := b.Upstream.Seen()
	if len(seen) != 2 || seen[0].Path != "/v1/models" || seen[0].RawQuery != "limit=5" || seen[1].Path != "/v1/models/claude-haiku-4-5" {
		t.Errorf("upstream saw %v, want GET /v1/models?limit=5 then /v1/models/claude-haiku-4-5", seen)
	}
	checkUpstream(t, seen, token)
}

// TestGoSDK_RefusedOnceWithoutRetry: a box whose declaration lacks agent
// (or that never reported, or a token that is no box's) gets a 403 the SDK
// surfaces with the broker's message, after exactly one attempt under the
// SDK's default retries, and nothing reaches the upstream.
func TestGoSDK_RefusedOnceWithoutRetry(t *testing.T) {
	tests := []struct {
		name  string
		words []string // nil: the box never reports
		token string   // "": the box's own
		want  []string // what the message names
	}{
		{"inference without agent", []string{"decide"}, "", []string{"inference", "agent", "decide"}},
		{"inference with no words", []string{}, "", []string{"inference", "agent"}},
		{"never reported", nil, "", []string{"no declaration", "inference", "agent"}},
		{"unknown token", []string{"agent"}, "studio_not-a-box-token", nil},
	}
	calls := []struct {
		name string
		do   func(c anthropic.Client) error
	}{
		{"messages", func(c anthropic.Client) error {
			_, err := c.Messages.New(context.Background(), hiParams())
			return err
		}},
		{"stream", func(c anthropic.Client) error {
			s := c.Messages.NewStreaming(context.Background(), hiParams())
			defer s.Close()
			for s.Next() {
			}
			return s.Err()
		}},
		{"count_tokens", func(c anthropic.Client) error {
			_, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
				Model: "claude-sonnet-4-5", Messages: hiParams().Messages})
			return err
		}},
		{"models", func(c anthropic.Client) error {
			_, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, token := setup(t, nil, tt.words)
			if tt.token != "" {
				token = tt.token
			}
			for _, call := range calls {
				t.Run(call.name, func(t *testing.T) {
					c, tries := goClient(b, token)
					front := len(b.Front.Seen())
					err := call.do(c)
					var apiErr *anthropic.Error
					if !errors.As(err, &apiErr) {
						t.Fatalf("%s: err = %v, want an *anthropic.Error", call.name, err)
					}
					if apiErr.StatusCode != http.StatusForbidden {
						t.Errorf("%s: status = %d, want 403", call.name, apiErr.StatusCode)
					}
					if apiErr.Type() != protocol.TypePermission && apiErr.Type() != protocol.TypeAuthn {
						t.Errorf("%s: error type = %q, want permission_error", call.name, apiErr.Type())
					}
					for _, w := range tt.want {
						if !strings.Contains(apiErr.Message, w) {
							t.Errorf("%s: message %q does not name %q", call.name, apiErr.Message, w)
						}
					}
					if apiErr.Message == "" {
						t.Errorf("%s: the SDK's error carries no message from the broker", call.name)
					}
					if got := tries.n.Load(); got != 1 {
						t.Errorf("%s: the SDK made %d attempts with MaxRetries %d, want 1 (a 403 is not retried)", call.name, got, sdkDefaultRetries)
					}
					if got := len(b.Front.Seen()) - front; got != 1 {
						t.Errorf("%s: the broker received %d requests, want 1", call.name, got)
					}
				})
			}
			if n := len(b.Upstream.Seen()); n != 0 {
				t.Errorf("upstream received %d requests for a refused box, want 0", n)
			}
		})
	}
}

// TestGoSDK_RefusalNamesTheEntry: the message the SDK shows for a box
// without agent is the protocol's own, word for word.
func TestGoSDK_RefusalNamesTheEntry(t *testing.T) {
	b, token := setup(t, nil, []string{"decide"})
	c, _ := goClient(b, token)
	_, err := c.Messages.New(context.Background(), hiParams())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("Messages.New: err = %v, want an *anthropic.Error", err)
	}
	d := &protocol.Declaration{Capabilities: []protocol.Capability{brokertest.Entry(protocol.Inference, "decide")}}
	want := protocol.DeclaredRefusal(d, "lobby", protocol.Inference, "agent")
	if apiErr.Message != want {
		t.Errorf("message = %q, want %q", apiErr.Message, want)
	}
	if !namesInferenceAndAgent(apiErr.Message) {
		t.Errorf("message %q does not name inference and agent", apiErr.Message)
	}
	// err.Error() shows the refusal body as it came, the message JSON-quoted.
	quoted, _ := json.Marshal(want)
	if !strings.Contains(err.Error(), strings.Trim(string(quoted), `"`)) {
		t.Errorf("err.Error() = %q does not show the broker's message", err.Error())
	}
}
