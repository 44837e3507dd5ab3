package admin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestProposals_TwoReplicas: two replicas on one PostgreSQL. A request
// refused on replica two opens a proposal that replica one lists;
// approved through one's admin API, the box's very next identical
// request to two is served; a proposal denied through two stays refused
// on one.
func TestProposals_TwoReplicas(t *testing.T) {
	one, two := brokertest.Replicas(t, brokertest.Options{})
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(host.Close)
	tok := one.AddBox("alpha")
	one.SetSecret("alpha", "ECHO", host.URL, "sk_replicas_value_0123456789")
	one.SetSecretRules("alpha", "ECHO", []string{"GET /ok/**"}, "")
	one.Report(tok, brokertest.Entry(protocol.Egress, "ECHO"))
	decode(t, "PUT ask", one.Admin("PUT", "/api/boxes/alpha/asks/"+approval.SecretScope("ECHO"), one.AdminToken, nil), 200, nil)

	for trial := range 3 {
		path := "/egress/ECHO/write/" + string(rune('a'+trial))
		if r := two.Do("POST", path, tok, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("trial %d: POST on two = %d %s, want 403", trial, r.StatusCode, r.Body)
		}
		var list operator.ProposalList
		decode(t, "GET proposals on one", one.Admin("GET", "/api/proposals?box=alpha&state=pending", one.AdminToken, nil), 200, &list)
		if len(list.Proposals) != 1 {
			t.Fatalf("trial %d: one lists %+v, want the proposal two opened", trial, list.Proposals)
		}
		id := list.Proposals[0].ID
		decode(t, "approve on one", one.Admin("POST", "/api/proposals/"+id+"/approve", one.AdminToken, operator.Decision{For: "15m"}), 200, nil)
		if r := two.Do("POST", path, tok, nil, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("trial %d: two's next identical request after approval on one = %d %s, want 200", trial, r.StatusCode, r.Body)
		}

		deny := path + "/deny"
		if r := one.Do("POST", deny, tok, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("trial %d: POST on one = %d, want 403", trial, r.StatusCode)
		}
		decode(t, "GET proposals on two", two.Admin("GET", "/api/proposals?box=alpha&state=pending", two.AdminToken, nil), 200, &list)
		if len(list.Proposals) != 1 {
			t.Fatalf("trial %d: two lists %+v, want one", trial, list.Proposals)
		}
		decode(t, "deny on two", two.Admin("POST", "/api/proposals/"+list.Proposals[0].ID+"/deny", two.AdminToken, nil), 200, nil)
		if r := one.Do("POST", deny, tok, nil, nil); r.StatusCode != http.StatusForbidden {
			t.Fatalf("trial %d: one's request after denial on two = %d, want 403", trial, r.StatusCode)
		}
	}
}
