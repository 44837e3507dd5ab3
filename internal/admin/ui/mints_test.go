package ui_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestUI_SecretShowsMintState: on the box's page, an oauth2 secret whose
// grant the token endpoint refused says so, and shows no value.
func TestUI_SecretShowsMintState(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	clientSecret, _ := b.SetRefusedOAuthGrant("alpha", "API")
	// The owner's page flags it on the box's page, and shows no value.
	status, body := get(t, b, "/ui/boxes/alpha", signInTB(t, b))
	if status != 200 || !strings.Contains(body, "mint-refused") || !strings.Contains(body, "OAuth grant needs renewing") {
		t.Errorf("the box's page (%d) does not flag the refused OAuth grant", status)
	}
	if strings.Contains(body, clientSecret) || strings.Contains(body, "rt_ADMINTEST") {
		t.Errorf("the box's page shows a value")
	}
}
