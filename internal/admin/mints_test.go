package admin_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAdmin_SecretsShowMintState: a listed oauth2 secret whose grant the
// token endpoint refused says so, and shows no value.
func TestAdmin_SecretsShowMintState(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	const clientSecret = "cs_ADMINTESTCLIENTSECRET"
	cfg := []byte(`{"token_url":"https://auth.example.com/token","client_id":"c","client_secret":"` + clientSecret + `","refresh_token":"rt_ADMINTESTREFRESH"}`)
	sealed, err := b.Server.Keyring.Seal(cfg, secrets.SecretAD("alpha", "API"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := b.Server.Store.SetSecret(ctx, store.Secret{Box: "alpha", Name: "API", Host: "https://api.example.com", Sealed: sealed, UpdatedAt: time.Now(), Kind: mint.KindOAuth2}); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Store.SetMintState(ctx, store.MintState{Box: "alpha", Name: "API", Of: mint.Of(sealed),
		Failure: "oauth2: the token endpoint refused (400 invalid_grant)", UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var list admin.SecretList
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
