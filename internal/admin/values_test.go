package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAdmin_ValueWithASpaceAtAnEndIsRefused: a credential, owner's key,
// visitor's key or secret put with a space before or after it is refused,
// not stored: a header would drop the space and a body field or the query
// keep it, so the one value would pass in one place and fail in another.
func TestAdmin_ValueWithASpaceAtAnEndIsRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	const key = "sk-ant-api03-EDGESPACE-0123456789"
	for _, value := range []string{" " + key, key + " ", "  " + key + "  "} {
		tests := []struct {
			name, path string
			body       any
		}{
			{"credential", "/api/credentials/anthropic", admin.CredentialValue{Value: value}},
			{"owner", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "owner", Value: value}},
			{"visitor", "/api/visitors/github:ann", admin.CredentialValue{Value: value}},
			{"secret", "/api/boxes/alpha/secrets/STRIPE", operator.SecretValue{Host: "https://api.stripe.com", Value: value, BodyFields: []string{"key"}}},
		}
		for _, tt := range tests {
			resp := b.Admin("PUT", tt.path, b.AdminToken, tt.body)
			msg := refusal(t, fmt.Sprintf("PUT %s %q", tt.path, value), resp, 400)
			if !strings.Contains(msg, "begins or ends with a space") || strings.Contains(string(resp.Body), key) {
				t.Errorf("PUT %s %s %q = %q, want a refusal saying the space and not the value", tt.path, tt.name, value, msg)
			}
		}
	}
	ctx := context.Background()
	for _, id := range []string{payer.SharedAnthropic, payer.OwnerAnthropic("alpha"), payer.VisitorAnthropic("github:ann")} {
		if _, err := b.Server.Store.Credential(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("credential %s after refused PUTs: %v, want none stored", id, err)
		}
	}
	if _, err := b.Server.Store.Secret(ctx, "alpha", "STRIPE"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("secret STRIPE after refused PUT: %v, want none stored", err)
	}
}
