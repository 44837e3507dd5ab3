package admin_test

import (
	"bytes"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/operator"
)

// TestAdmin_SecretsShowMintState: a listed oauth2 secret whose grant the
// token endpoint refused says so, and shows no value.
func TestAdmin_SecretsShowMintState(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	clientSecret, _ := b.SetRefusedOAuthGrant("alpha", "API")
	var list operator.SecretList
	resp := b.Admin("GET", "/api/boxes/alpha/secrets", b.AdminToken, nil)
	decode(t, "GET secrets", resp, 200, &list)
	if len(list.Secrets) != 1 || list.Secrets[0].Kind != mint.KindOAuth2 ||
		!bytes.Contains([]byte(list.Secrets[0].State), []byte("OAuth grant needs renewing")) {
		t.Errorf("GET secrets = %+v, want API as oauth2 flagged for renewal", list.Secrets)
	}
	if bytes.Contains(resp.Body, []byte(clientSecret)) || bytes.Contains(resp.Body, []byte("rt_ADMINTEST")) {
		t.Errorf("GET secrets shows a value")
	}
}
