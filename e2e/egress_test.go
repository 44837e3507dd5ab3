package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestGoSDK_ThroughEgress: an app's SDK pointed at an egress stand-in, as
// the box is given it (<NAME>_KEY is the box's token, <NAME>_BASE_URL is
// <broker>/egress/<NAME>), reaches the secret's host with the secret's
// value in place of the token. Here the app's API is Anthropic's, spoken
// by the official Go SDK, and the secret's host is the recording stand-in.
func TestGoSDK_ThroughEgress(t *testing.T) {
	const name, value = "CLAUDE_APP", "sk-ant-api03-OWNER-SECRET-VALUE-0123456789"
	rec := &brokertest.Recorder{Handler: http.HandlerFunc(brokertest.AnthropicStandIn)}
	host := httptest.NewServer(rec)
	t.Cleanup(host.Close)
	tests := []struct {
		name    string
		scope   []string
		wantErr string // "": the call goes through
	}{
		{"declared", []string{name}, ""},
		{"not declared", []string{"STRIPE"}, "egress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := brokertest.New(t, brokertest.Options{})
			token := b.AddBox("e2e")
			b.SetSecret("e2e", name, host.URL, value)
			b.Report(token, brokertest.Entry(protocol.Egress, tt.scope...))
			env := map[string]string{name + "_KEY": token, name + "_BASE_URL": b.URL + protocol.PrefixEgress + "/" + name}
			tries := &attempts{next: http.DefaultTransport}
			c := anthropic.NewClient(
				option.WithoutEnvironmentDefaults(),
				option.WithBaseURL(env[name+"_BASE_URL"]+"/"),
				option.WithAPIKey(env[name+"_KEY"]),
				option.WithHTTPClient(&http.Client{Transport: tries}),
				option.WithMaxRetries(sdkDefaultRetries),
			)
			before := len(rec.Seen())
			msg, err := c.Messages.New(context.Background(), hiParams())
			seen := rec.Seen()[before:]
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Messages.New through egress: %v", err)
				}
				if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from the stand-in." {
					t.Errorf("Messages.New = %s", msg.RawJSON())
				}
				if len(seen) != 1 || seen[0].Path != "/v1/messages" {
					t.Fatalf("the secret's host saw %d requests, want one POST /v1/messages", len(seen))
				}
				// The SDK sends its API key as a bearer (Go SDK v2); the value
				// must stand where the token stood.
				if got := seen[0].Header.Get("Authorization"); got != "Bearer "+value {
					t.Errorf("the secret's host received Authorization %q, want the secret's value as the bearer", got)
				}
				if strings.Contains(string(seen[0].Body), token) || strings.Contains(seen[0].Header.Get("Authorization"), token) {
					t.Errorf("the secret's host received the box's token")
				}
				return
			}
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
				t.Fatalf("Messages.New = %v, want a 403", err)
			}
			if !strings.Contains(apiErr.Message, tt.wantErr) || !strings.Contains(apiErr.Message, name) {
				t.Errorf("message %q does not name egress and %s", apiErr.Message, name)
			}
			if n := tries.n.Load(); n != 1 {
				t.Errorf("the SDK made %d attempts, want 1", n)
			}
			if len(seen) != 0 {
				t.Errorf("the secret's host received %d requests for an undeclared secret", len(seen))
			}
		})
	}
}
