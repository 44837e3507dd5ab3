package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin/ui"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestLeaks runs every route — served, refused, failing upstream — with
// distinctive credentials (the shared one, a box owner's, a visitor's and
// the Fountain key), a secret value, a grant and box tokens, then greps
// everything the broker produced. No answer carries a credential, the
// secret value or the grant; no log line carries any of them or any
// token; and each upstream received only what it may: the Anthropic API
// the Anthropic credentials (the visitor's only on a granted call),
// Fountain its key, the secret's host the secret's value, and none of
// them a token or the grant.
func TestLeaks(t *testing.T) {
	const (
		credential = "sk-ant-api03-LEAKCANARY-CREDENTIAL-7f3a9c"
		ownerCred  = "sk-ant-api03-LEAKCANARY-OWNER-41d0e2"
		visitorCrd = "sk-ant-api03-LEAKCANARY-VISITOR-9a7b15"
		fountainKy = "fk-LEAKCANARY-FOUNTAIN-c3e8f6"
		secretVal  = "sv-LEAKCANARY-SECRET-2b8d41"
		visitor    = "github:leak-visitor"
	)
	var echoSeen brokertest.Recorder
	echoSeen.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A careless API that repeats the key in a header and the body.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Write([]byte(`{"you_sent":"` + r.Header.Get("Authorization") + `","q":"` + r.URL.RawQuery + `"}`))
	})
	echo := httptest.NewServer(&echoSeen)
	defer echo.Close()
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs, Fountain: true})
	a := b.AddBox("a")
	never := b.AddBox("never")
	o := b.AddBox("o")
	other := b.AddBox("other")
	b.SetCredential(payer.SharedAnthropic, credential)
	b.SetCredential(payer.OwnerAnthropic("o"), ownerCred)
	b.SetCredential(payer.SharedFountain, fountainKy)
	// The visitor's credential and the secret are set through the admin
	// API, whose answers are grepped with the rest.
	var answers, operator strings.Builder // to boxes; to the operator
	adminAnswer := func(r brokertest.Response, want int, what string) {
		t.Helper()
		if r.StatusCode != want {
			t.Fatalf("%s = %d %s, want %d", what, r.StatusCode, r.Body, want)
		}
		r.Header.Write(&operator)
		operator.Write(r.Body)
	}
	adminAnswer(b.Admin("PUT", "/api/credentials/"+payer.VisitorAnthropic(visitor), b.AdminToken, map[string]string{"value": visitorCrd}), 200, "PUT visitor credential")
	adminAnswer(b.Admin("PUT", "/api/boxes/a/secrets/CANARY", b.AdminToken, map[string]string{"host": echo.URL, "value": secretVal}), 200, "PUT secret")
	b.Sync()
	ctx := context.Background()
	ob, err := b.Server.Store.Box(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	ob.PayerKind = protocol.PayerOwner
	if err := b.Server.Store.UpdateBox(ctx, ob); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	grantVal, _, err := grant.Issue(ctx, b.Server.Store, "a", visitor, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a, o, other} {
		b.Report(tok, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("egress", "CANARY", "UNHELD"),
			brokertest.Entry("feedback", "agent"), brokertest.Entry("fountain", "agent", "conversations", "sandboxes"))
	}
	tokens := []string{a, never, o, other}

	decide := `{"model":"claude-sonnet-4-5","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"x":"x","y":"y"}}}}`
	withGrant := func(h http.Header, g string) http.Header { h.Set(protocol.HeaderGrant, g); return h }
	requests := []struct {
		method, path, body string
		header             http.Header
	}{
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/llm/anthropic/v1/messages/count_tokens", `{}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models", ``, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models/claude-x", ``, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/complete", `{}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {never}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {a + "x"}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", `{"model":"m"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + never}}},
		// The visitor pays with a grant, on both model routes, streamed too.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal)},
		{"POST", "/decide/v1/systemone", decide, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		// The grant where it does not apply: another box, twice, beside
		// a token that is no box's, and on routes that are not model calls.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {other}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, http.Header{"X-Api-Key": {a}, protocol.HeaderGrant: {grantVal, grantVal}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {a + "x"}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal+" x")},
		{"GET", "/egress/CANARY/v1/granted", ``, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		{"GET", "/fountain/api/conversations", ``, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		{"POST", "/api/box/declaration", `{"capabilities":[]}`, withGrant(http.Header{"Authorization": {"Bearer " + never}}, grantVal)},
		// The owner pays for box o.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {o}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + o}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, withGrant(http.Header{"X-Api-Key": {o}}, grantVal)},
		{"GET", "/egress/CANARY/v1/thing?key=" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/egress/CANARY/v1/thing", `{"x":1}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/egress/UNHELD/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/OTHER/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/CANARY/v1", ``, http.Header{"Authorization": {"Bearer " + never}}},
		{"GET", "/egress/CANARY/v1", ``, http.Header{"Authorization": {"Bearer " + o}}},
		{"GET", "/egress/CANARY/" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":"x"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":[]}`, http.Header{"Authorization": {"Bearer " + a + "x"}}},
		{"POST", "/api/feedback", `{"entries":[{"note":"n"}]}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/fountain/api/conversations", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/fountain/api/conversations", `{}`, http.Header{"Authorization": {"Bearer " + o}}},
		{"GET", "/fountain/api/sandboxes/sb-1", ``, http.Header{"Authorization": {"Bearer " + a}}},
	}
	for _, rq := range requests {
		resp := b.Do(rq.method, rq.path, "", []byte(rq.body), rq.header)
		resp.Header.Write(&answers)
		answers.Write(resp.Body)
	}
	// The broker's own answer to a report says who pays, and never with what.
	for _, tok := range []string{a, o} {
		kept := b.Report(tok, brokertest.Entry("inference", "agent"))
		fmt.Fprintf(&answers, "%+v", kept)
	}

	// Everything the operator's side shows: metrics, health, every admin
	// API listing, the audit log, a refused write, and the owner's page
	// with each box's grants.
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/api/boxes", "/api/credentials", "/api/audit", "/api/visitors"} {
		adminAnswer(b.Admin("GET", path, b.AdminToken, nil), 200, "GET "+path)
	}
	for _, box := range []string{"a", "o", "other", "never"} {
		for _, sub := range []string{"", "/secrets", "/feedback", "/resources", "/grants", "/budgets", "/spend"} {
			adminAnswer(b.Admin("GET", "/api/boxes/"+box+sub, b.AdminToken, nil), 200, "GET /api/boxes/"+box+sub)
		}
	}
	adminAnswer(b.Admin("PUT", "/api/credentials/owner:nobody", b.AdminToken, map[string]string{"value": ownerCred}), 404, "PUT owner:nobody")
	adminAnswer(b.Admin("GET", "/api/boxes", b.AdminToken+"x", nil), 401, "GET /api/boxes with a wrong admin token")
	cookie := signIn(t, b)
	for _, path := range []string{"/ui/", "/ui/boxes/a", "/ui/boxes/o"} {
		adminAnswer(uiGet(t, b, path, cookie), 200, "GET "+path)
	}

	secrets := []string{credential, ownerCred, visitorCrd, fountainKy, secretVal, grantVal, b.AdminToken}
	for _, v := range secrets {
		if strings.Contains(answers.String(), v) {
			t.Errorf("an answer to a box carried %.24s…", v)
		}
		if strings.Contains(operator.String(), v) {
			t.Errorf("the admin listener (API, metrics or owner's page) showed %.24s…", v)
		}
		if strings.Contains(logs.String(), v) {
			t.Errorf("the logs carry %.24s…", v)
		}
	}
	for _, tok := range tokens {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the logs carry a box token")
		}
		// The operator's side shows a box token only in the answer that
		// mints it, and none was minted here.
		if strings.Contains(operator.String(), tok) {
			t.Errorf("the admin listener (API, metrics or owner's page) showed a box token")
		}
	}
	// The operator's side was grepped with the rest: it lists the boxes,
	// the grants and the metrics.
	if !regexp.MustCompile(`"name": *"o"`).MatchString(operator.String()) || !strings.Contains(operator.String(), "grt_") ||
		!strings.Contains(operator.String(), "boxbroker_requests_total") {
		t.Errorf("the admin answers list no box, no grant or no metrics, so nothing was grepped: %.400s", operator.String())
	}
	dump := func(seen []brokertest.Seen) string {
		var s strings.Builder
		for _, x := range seen {
			x.Header.Write(&s)
			s.WriteString(x.Path + "?" + x.RawQuery)
			s.Write(x.Body)
		}
		return s.String()
	}
	upstreams := []struct {
		name   string
		got    string
		allows []string
	}{
		{"the Anthropic API", dump(b.Upstream.Seen()), []string{credential, ownerCred, visitorCrd}},
		{"Fountain", dump(b.Fountain.Seen()), []string{fountainKy}},
		{"the secret's host", dump(echoSeen.Seen()), []string{secretVal}},
	}
	for _, up := range upstreams {
		for _, v := range append(secrets, tokens...) {
			if strings.Contains(up.got, v) && !slices.Contains(up.allows, v) {
				t.Errorf("%s received %.24s…", up.name, v)
			}
		}
		for _, v := range up.allows {
			if !strings.Contains(up.got, v) {
				t.Errorf("%s never received %.24s…, so that path went untried", up.name, v)
			}
		}
	}
	// The visitor's credential paid exactly the three granted calls of
	// box a, and the owner's exactly box o's three (its grant was a's).
	paidBy := map[string]int{}
	for _, x := range b.Upstream.Seen() {
		paidBy[x.Header.Get("X-Api-Key")]++
	}
	if paidBy[visitorCrd] != 3 || paidBy[ownerCred] != 3 {
		t.Errorf("the visitor's credential paid %d calls and the owner's %d, want 3 and 3", paidBy[visitorCrd], paidBy[ownerCred])
	}
	if !strings.Contains(logs.String(), `"msg":"request"`) || !strings.Contains(logs.String(), `"msg":"grant accepted"`) {
		t.Errorf("no request or accepted grant was logged: %.300s", logs.String())
	}
}

// signIn signs in to the owner's page with the admin token and returns
// the session cookie.
func signIn(t *testing.T, b *brokertest.Broker) *http.Cookie {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(b.AdminURL+"/ui/signin", url.Values{"token": {b.AdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == ui.SessionCookie {
			return c
		}
	}
	t.Fatalf("POST /ui/signin = %d with no session cookie", resp.StatusCode)
	return nil
}

// uiGet reads a page of the owner's page, signed in.
func uiGet(t *testing.T, b *brokertest.Broker, path string, cookie *http.Cookie) brokertest.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", b.AdminURL+path, nil)
	req.AddCookie(cookie)
	resp, err := b.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return brokertest.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}
}
