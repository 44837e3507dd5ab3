package admin_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
)

// TestAdmin_TwoReplicas_InForceWhenAnswered runs two replicas on one
// PostgreSQL and one master key, writes through replica one's admin API,
// and sends the box's very next request to replica two, which holds the
// state before the write in its cache: every write is in force there
// when the admin API answers. Pausing, the payer and whether a box has a
// budget are cached, so their answers wait out the cache's staleness bound
// (Cache.Settle); grants are read from the store at each request.
func TestAdmin_TwoReplicas_InForceWhenAnswered(t *testing.T) {
	one, two := brokertest.Replicas(t, brokertest.Options{})
	tok := one.AdminToken
	box := one.AddBox("alpha")
	one.SetCredential(payer.SharedAnthropic, sharedKey)
	decode(t, "PUT visitor", one.Admin("PUT", "/api/visitors/github:ann", tok, admin.CredentialValue{Value: visitorKey}), 200, nil)
	one.Report(box, brokertest.Entry("inference", "agent"))
	two.PaidBy(t, box, "", "shared", sharedKey) // two now holds alpha in its cache

	owner := "github:own"
	for trial := range 5 {
		decode(t, "PATCH paused", one.Admin("PATCH", "/api/boxes/alpha", tok, map[string]any{"paused": true}), 200, nil)
		if resp, key := two.Call(t, box, ""); resp.StatusCode != 403 || key != "" {
			t.Fatalf("trial %d: replica two's next call after pausing on one = %d (upstream saw %q), want 403", trial, resp.StatusCode, key)
		}
		decode(t, "PATCH resumed", one.Admin("PATCH", "/api/boxes/alpha", tok, map[string]any{"paused": false}), 200, nil)
		two.PaidBy(t, box, "", "shared", sharedKey)

		decode(t, "PUT payer owner", one.Admin("PUT", "/api/boxes/alpha/payer", tok, operator.PayerSetting{Kind: "owner", Principal: &owner, Value: ownerKey}), 200, nil)
		two.PaidBy(t, box, "", "owner "+owner, ownerKey)
		decode(t, "PUT payer shared", one.Admin("PUT", "/api/boxes/alpha/payer", tok, operator.PayerSetting{Kind: "shared"}), 200, nil)
		two.PaidBy(t, box, "", "shared", sharedKey)

		var issued operator.IssuedGrant
		decode(t, "POST grant", one.Admin("POST", "/api/boxes/alpha/grants", tok, operator.NewGrant{Principal: "github:ann"}), 201, &issued)
		two.PaidBy(t, box, issued.Value, "visitor github:ann", visitorKey)
		if resp := one.Admin("DELETE", "/api/grants/"+issued.Grant.ID, tok, nil); resp.StatusCode != 204 {
			t.Fatalf("DELETE grant = %d %s", resp.StatusCode, resp.Body)
		}
		two.PaidBy(t, box, issued.Value, "shared", sharedKey)

		decode(t, "PUT budget 0", one.Admin("PUT", "/api/boxes/alpha/budgets", tok, map[string]any{"usd": 0}), 200, nil)
		if resp, _ := two.Call(t, box, ""); resp.StatusCode != 403 || !strings.Contains(string(resp.Body), "budget") {
			t.Fatalf("trial %d: replica two's next call after a zero budget on one = %d %s, want 403 over budget", trial, resp.StatusCode, resp.Body)
		}
		if resp := one.Admin("DELETE", "/api/boxes/alpha/budgets", tok, nil); resp.StatusCode != 204 {
			t.Fatalf("DELETE budget = %d %s", resp.StatusCode, resp.Body)
		}
		two.PaidBy(t, box, "", "shared", sharedKey)
	}
}
