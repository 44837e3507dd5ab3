package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_LogBytesCostAndSpendChart makes two priced calls through the
// broker and reads the box's page: each call's row in the request log
// shows the bytes the box received and the cost the broker measured, and
// the spend picture draws this month's spend from those costs against
// the budget line. No page holds the box's token, the credential or a
// secret's value.
func TestUI_LogBytesCostAndSpendChart(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	b.SetCredential(payer.SharedAnthropic, sharedKey)
	if r := b.Do("POST", protocol.RouteDeclaration, tok, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]},{"name":"egress","broker":"lobby","scope":["STRIPE"]}]}`), nil); r.StatusCode != 200 {
		t.Fatalf("report = %d", r.StatusCode)
	}
	cookie, csrf := signedInForm(t, b)
	const value = "sk_live_cost-test-0123456789"
	if p := visit(t, b, "POST", "/ui/boxes/alpha/secrets", cookie, url.Values{"csrf": {csrf}, "name": {"STRIPE"}, "host": {"https://api.stripe.com"}, "value": {value}}, nil); p.status != 303 {
		t.Fatalf("set STRIPE = %d, want 303", p.status)
	}
	if p := visit(t, b, "POST", "/ui/boxes/alpha/budget", cookie, url.Values{"csrf": {csrf}, "usd": {"1"}}, nil); p.status != 303 {
		t.Fatalf("budget $1 = %d, want 303", p.status)
	}
	var bodies []int
	for range 2 {
		r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(brokertest.MessagesBody), http.Header{"Content-Type": {"application/json"}})
		if r.StatusCode != 200 {
			t.Fatalf("messages = %d %s, want 200", r.StatusCode, r.Body)
		}
		bodies = append(bodies, len(r.Body))
	}
	ctx := context.Background()
	if err := b.Server.Audit.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	entries, err := b.Server.Store.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		if e.Route == "/llm/anthropic/v1/messages" {
			if e.Cost <= 0 || e.Bytes != int64(bodies[0]) {
				t.Fatalf("a call's audit entry: bytes %d, cost %d; want %d and a cost", e.Bytes, e.Cost, bodies[0])
			}
			total += e.Cost
		}
	}

	p := visit(t, b, "GET", "/ui/boxes/alpha", cookie, nil, nil)
	if p.status != 200 {
		t.Fatalf("GET /ui/boxes/alpha = %d", p.status)
	}
	log := p.body[strings.Index(p.body, `id="log"`):]
	row := log[strings.Index(log, "<tbody>"):]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{
		`<th class="num">Bytes</th><th class="num">Cost</th>`,
		fmt.Sprintf("title=\"%d bytes\">%d\u00a0B<", bodies[1], bodies[1]),
		">" + spend.FormatUSD(total/2) + "<",
	} {
		if !strings.Contains(log[:strings.Index(log, "<tbody>")]+row, want) {
			t.Errorf("the request log's newest row lacks %q:\n%s", want, row)
		}
	}
	i := strings.Index(p.body, `id="spend"`)
	if i < 0 {
		t.Fatalf("alpha's page has no spend picture")
	}
	pic := p.body[i : i+strings.Index(p.body[i:], "</section>")]
	for _, want := range []string{`<svg class="chart"`, `class="spent"`, `class="limit"`,
		spend.FormatUSD(total) + " measured over 2 priced calls this month", "against its budget of $1.00"} {
		if !strings.Contains(pic, want) {
			t.Errorf("the spend picture lacks %q:\n%s", want, pic)
		}
	}
	for _, path := range []string{"/ui/", "/ui/boxes/alpha", "/ui/boxes/alpha?log=1"} {
		body := visit(t, b, "GET", path, cookie, nil, nil).body
		for _, secret := range []string{tok, sharedKey, value, b.AdminToken} {
			if strings.Contains(body, secret) {
				t.Errorf("GET %s holds a token, credential or secret's value", path)
			}
		}
	}
}
