package ui_test

import (
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_SecretShowsMintState: on the box's page, an oauth2 secret whose
// grant the token endpoint refused says so, and shows no value.
func TestUI_SecretShowsMintState(t *testing.T) {
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
	// The owner's page flags it on the box's page, and shows no value.
	status, body := get(t, b, "/ui/boxes/alpha", signInTB(t, b))
	if status != 200 || !strings.Contains(body, "mint-refused") || !strings.Contains(body, "OAuth grant needs renewing") {
		t.Errorf("the box's page (%d) does not flag the refused OAuth grant", status)
	}
	if strings.Contains(body, clientSecret) || strings.Contains(body, "rt_ADMINTEST") {
		t.Errorf("the box's page shows a value")
	}
}
