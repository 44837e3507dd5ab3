package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// decode decodes a 2xx answer into v, failing the test otherwise.
func decode(t *testing.T, what string, resp brokertest.Response, wantStatus int, v any) {
	t.Helper()
	if resp.StatusCode != wantStatus {
		t.Fatalf("%s = %d %s, want %d", what, resp.StatusCode, resp.Body, wantStatus)
	}
	if v == nil {
		return
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		t.Fatalf("%s: body %s: %v", what, resp.Body, err)
	}
}

// refusal checks resp is a refusal with status and returns its message.
func refusal(t *testing.T, what string, resp brokertest.Response, status int) string {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s = %d %s, want %d", what, resp.StatusCode, resp.Body, status)
	}
	typ, msg := brokertest.Refusal(resp.Body)
	if typ == "" || msg == "" {
		t.Fatalf("%s body = %s, want a refusal", what, resp.Body)
	}
	return msg
}

func TestAdmin_TokenRequired(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	boxToken := b.AddBox("alpha")
	wrong := token.AdminPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	grantValue, _, err := grant.Issue(context.Background(), b.Server.Store, "alpha", "github:ann", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tokens := []struct {
		name, token string
	}{
		{"no token", ""},
		{"wrong token", wrong},
		{"a box's token", boxToken},
		{"admin token with a suffix", b.AdminToken + "x"},
		{"a grant", grantValue},
		{"the admin token's hash", token.Hash(b.AdminToken)},
	}
	srv := b.Server.Admin
	for _, rt := range srv.Routes() {
		if rt.Open {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{name}", "alpha", "{id}", "anthropic", "{secret}", "GITHUB", "{kind}", "vault", "{principal}", "github:ann").Replace(path)
		for _, tok := range tokens {
			t.Run(rt.Pattern+"/"+tok.name, func(t *testing.T) {
				resp := b.Admin(method, path, tok.token, map[string]any{})
				refusal(t, method+" "+path, resp, http.StatusUnauthorized)
				if tok.token != "" && bytes.Contains(resp.Body, []byte(tok.token)) {
					t.Errorf("%s with %s echoed the token: %s", method, path, resp.Body)
				}
				if resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: no WWW-Authenticate header on a 401", method, path)
				}
			})
		}
	}
	// Nothing was changed by the refused requests.
	if _, err := b.Server.Store.Box(context.Background(), "alpha"); err != nil {
		t.Errorf("Box(alpha) after refused admin requests = %v, want it kept", err)
	}
	if resp := b.Do("POST", protocol.RouteDeclaration, boxToken, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 200 {
		t.Errorf("the box's own token after refused admin requests = %d, want 200 (not rotated)", resp.StatusCode)
	}
}

func TestAdmin_RevokedTokenRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	token, tok, err := operator.MintRole(ctx, b.Server.Store, "laptop", store.AdminOperator, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if resp := b.Admin("GET", "/api/boxes", token, nil); resp.StatusCode != 200 {
		t.Fatalf("GET /api/boxes with a fresh admin token = %d, want 200", resp.StatusCode)
	}
	if err := b.Server.Store.DeleteAdminToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	refusal(t, "GET /api/boxes with a revoked admin token", b.Admin("GET", "/api/boxes", token, nil), http.StatusUnauthorized)
}

func TestAdmin_OpenRoutes(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tests := []struct {
		path   string
		status int
	}{
		{"/healthz", 200},
		{"/readyz", 200},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if resp := b.Admin("GET", tt.path, "", nil); resp.StatusCode != tt.status {
				t.Errorf("GET %s = %d %s, want %d", tt.path, resp.StatusCode, resp.Body, tt.status)
			}
		})
	}
}

func TestAdmin_UnknownRoutesAreRefusals(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/nothing", 404},
		{"GET", "/index.html", 404}, // "/" itself goes to the owner's page (TestAdmin_RootRedirectsToThePage)
		{"POST", "/", 405},
		{"PUT", "/api/boxes", 405},
		{"POST", "/api/credentials", 405},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := b.Admin(tt.method, tt.path, b.AdminToken, nil)
			refusal(t, tt.method+" "+tt.path, resp, tt.status)
			if tt.status == 405 && resp.Header.Get("Allow") == "" {
				t.Errorf("%s %s: 405 with no Allow header", tt.method, tt.path)
			}
		})
	}
}

func TestAdmin_Boxes(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken

	var added operator.BoxToken
	decode(t, "POST /api/boxes", b.Admin("POST", "/api/boxes", tok, operator.NewBox{Name: "alpha", Consent: true}), 201, &added)
	if added.Box.Name != "alpha" || !added.Box.Consent || added.Box.ReportedAt != nil || added.Box.Payer.Kind != "shared" {
		t.Errorf("POST /api/boxes = %+v, want alpha with consent, never reported, shared payer", added.Box)
	}
	if !strings.HasPrefix(added.Token, "bbx_") {
		t.Fatalf("POST /api/boxes token = %q, want a box token", added.Token)
	}
	// The token works at the box-facing listener.
	b.Report(added.Token, brokertest.Entry("inference", "agent"))

	tests := []struct {
		name   string
		body   any
		status int
	}{
		{"duplicate", operator.NewBox{Name: "alpha"}, 409},
		{"bad name", operator.NewBox{Name: "Alpha!"}, 400},
		{"empty name", map[string]any{}, 400},
		{"unknown field", map[string]any{"name": "gamma", "payer": "owner"}, 400},
		{"wrong type", map[string]any{"name": 7}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, "POST /api/boxes "+tt.name, b.Admin("POST", "/api/boxes", tok, tt.body), tt.status)
		})
	}

	var got operator.BoxView
	decode(t, "GET /api/boxes/alpha", b.Admin("GET", "/api/boxes/alpha", tok, nil), 200, &got)
	if got.ReportedAt == nil || len(got.Capabilities) != 1 || got.Capabilities[0].Name != "inference" || got.Capabilities[0].Scope[0] != "agent" {
		t.Errorf("GET /api/boxes/alpha = %+v, want its report with inference agent", got)
	}
	if msg := refusal(t, "GET /api/boxes/nobox", b.Admin("GET", "/api/boxes/nobox", tok, nil), 404); msg != operator.NoBox("nobox") || !strings.Contains(msg, "`boxbroker box list`") {
		t.Errorf("GET /api/boxes/nobox = %q, want %q", msg, operator.NoBox("nobox"))
	}

	decode(t, "PATCH consent", b.Admin("PATCH", "/api/boxes/alpha", tok, map[string]any{"paused": true}), 200, &got)
	if !got.Paused || !got.Consent {
		t.Errorf("PATCH paused=true = %+v, want paused and consent kept", got)
	}
	refusal(t, "PATCH unknown field", b.Admin("PATCH", "/api/boxes/alpha", tok, map[string]any{"payer": "owner"}), 400)
	refusal(t, "PATCH nobox", b.Admin("PATCH", "/api/boxes/nobox", tok, map[string]any{"paused": true}), 404)

	var rotated operator.BoxToken
	decode(t, "POST /api/boxes/alpha/token", b.Admin("POST", "/api/boxes/alpha/token", tok, nil), 200, &rotated)
	if rotated.Token == "" || rotated.Token == added.Token {
		t.Fatalf("rotate = %q, want a new token", rotated.Token)
	}
	if resp := b.Do("POST", protocol.RouteDeclaration, added.Token, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 401 {
		t.Errorf("old token after rotate = %d, want 401", resp.StatusCode)
	}
	b.Report(rotated.Token)

	var list admin.BoxList
	decode(t, "GET /api/boxes", b.Admin("GET", "/api/boxes", tok, nil), 200, &list)
	if len(list.Boxes) != 1 || list.Boxes[0].Name != "alpha" {
		t.Errorf("GET /api/boxes = %+v, want alpha", list.Boxes)
	}
	listed := b.Admin("GET", "/api/boxes", tok, nil).Body
	if bytes.Contains(listed, []byte(rotated.Token)) || bytes.Contains(listed, []byte(added.Token)) {
		t.Errorf("GET /api/boxes shows a box token")
	}

	if resp := b.Admin("DELETE", "/api/boxes/alpha", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE /api/boxes/alpha = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	refusal(t, "DELETE /api/boxes/alpha again", b.Admin("DELETE", "/api/boxes/alpha", tok, nil), 404)
	if resp := b.Do("POST", protocol.RouteDeclaration, rotated.Token, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 401 {
		t.Errorf("removed box's token = %d, want 401", resp.StatusCode)
	}
}

func TestAdmin_ListingFirstAndSpendThisMonth(t *testing.T) {
	now := time.Now().UTC()
	month := now.Format("2006-01")
	b := brokertest.New(t, brokertest.Options{})
	tokens := map[string]string{}
	for _, name := range []string{"alpha", "beta", "gamma", "delta"} {
		tokens[name] = b.AddBox(name)
	}
	report := func(name, extra string) {
		t.Helper()
		body := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]` + extra + `}`
		if resp := b.Do("POST", protocol.RouteDeclaration, tokens[name], []byte(body), nil); resp.StatusCode != 200 {
			t.Fatalf("report %s: %d %s", name, resp.StatusCode, resp.Body)
		}
	}
	report("alpha", `,"listing":{"published":false,"title":"Alpha","line":"hidden"}`)
	report("beta", `,"listing":{"published":true,"title":"Beta","line":"shown"},"spend":{"month":"`+month+`","usd":3.5,"runs":4,"unpriced":1,"byPrincipal":[{"principal":"github:ann","usd":3,"runs":3,"unpriced":0},{"principal":null,"usd":0.5,"runs":1,"unpriced":1}]}`)
	report("delta", `,"listing":{"title":"Delta","line":"shown by default"},"spend":{"month":"2001-01","usd":9,"runs":9,"unpriced":0,"byPrincipal":[]}`)

	var list admin.BoxList
	decode(t, "GET /api/boxes", b.Admin("GET", "/api/boxes", b.AdminToken, nil), 200, &list)
	var names []string
	for _, v := range list.Boxes {
		names = append(names, v.Name)
	}
	if got, want := strings.Join(names, ","), "beta,delta,alpha,gamma"; got != want {
		t.Errorf("GET /api/boxes order = %s, want %s (published listings first, each part by name)", got, want)
	}
	byName := map[string]operator.BoxView{}
	for _, v := range list.Boxes {
		byName[v.Name] = v
	}
	beta := byName["beta"]
	if beta.Spend == nil || beta.Spend.Month != month || beta.Spend.USD != 3.5 || len(beta.Spend.ByPrincipal) != 2 {
		t.Fatalf("beta's spend = %+v, want this month's with two principals", beta.Spend)
	}
	if p := beta.Spend.ByPrincipal[0]; p.Principal == nil || *p.Principal != "github:ann" || p.USD != 3 || p.Runs != 3 {
		t.Errorf("beta's first principal = %+v, want github:ann 3 USD in 3 runs", p)
	}
	if p := beta.Spend.ByPrincipal[1]; p.Principal != nil || p.Unpriced != 1 {
		t.Errorf("beta's second principal = %+v, want null with 1 unpriced", p)
	}
	if byName["delta"].Spend != nil {
		t.Errorf("delta's spend = %+v, want null: it reported another month's", byName["delta"].Spend)
	}
	if l := byName["delta"].Listing; l == nil || !l.Published || l.Title != "Delta" {
		t.Errorf("delta's listing = %+v, want published by default", l)
	}
	if byName["gamma"].Listing != nil || byName["gamma"].ReportedAt != nil {
		t.Errorf("gamma = %+v, want never reported, no listing", byName["gamma"])
	}
}

func TestAdmin_Credentials(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	const value = "sk-ant-api03-admin-set-credential"

	var cv operator.CredentialView
	resp := b.Admin("PUT", "/api/credentials/anthropic", tok, admin.CredentialValue{Value: value})
	decode(t, "PUT /api/credentials/anthropic", resp, 200, &cv)
	if cv.ID != "anthropic" || cv.Kind != "API key" {
		t.Errorf("PUT anthropic = %+v, want anthropic, API key", cv)
	}
	if bytes.Contains(resp.Body, []byte(value)) {
		t.Errorf("PUT /api/credentials/anthropic echoed the value: %s", resp.Body)
	}

	// The broker spends it at once.
	box := b.AddBox("alpha")
	b.Report(box, brokertest.Entry("inference", "agent"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", box, []byte(`{"model":"m","max_tokens":1,"messages":[]}`), nil); r.StatusCode != 200 {
		t.Fatalf("messages after PUT credential = %d %s, want 200", r.StatusCode, r.Body)
	}
	seen := b.Upstream.Seen()
	if got := seen[len(seen)-1].Header.Get("X-Api-Key"); got != value {
		t.Errorf("upstream x-api-key = %q, want the credential set through the admin API", got)
	}

	var list admin.CredentialList
	resp = b.Admin("GET", "/api/credentials", tok, nil)
	decode(t, "GET /api/credentials", resp, 200, &list)
	if len(list.Credentials) != 1 || list.Credentials[0].ID != "anthropic" {
		t.Errorf("GET /api/credentials = %+v, want anthropic", list.Credentials)
	}
	if bytes.Contains(resp.Body, []byte(value)) {
		t.Errorf("GET /api/credentials shows the value: %s", resp.Body)
	}

	bad := []struct {
		name, path string
		body       any
		status     int
	}{
		{"unknown id", "/api/credentials/openai", admin.CredentialValue{Value: "x"}, 400},
		{"empty value", "/api/credentials/fountain", admin.CredentialValue{}, 400},
		{"line break", "/api/credentials/fountain", admin.CredentialValue{Value: "abc\r\nX-Evil: 1"}, 400},
		{"too long", "/api/credentials/fountain", admin.CredentialValue{Value: strings.Repeat("a", operator.MaxValue+1)}, 400},
		{"owner of no box", "/api/credentials/owner:nobox", admin.CredentialValue{Value: "x"}, 404},
		{"body too large", "/api/credentials/fountain", admin.CredentialValue{Value: strings.Repeat("a", admin.MaxBody)}, 413},
		{"not JSON", "/api/credentials/fountain", "just a string", 400},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin("PUT", tt.path, tok, tt.body)
			refusal(t, "PUT "+tt.path, resp, tt.status)
			if cv, ok := tt.body.(admin.CredentialValue); ok && len(cv.Value) > 2 && bytes.Contains(resp.Body, []byte(cv.Value)) {
				t.Errorf("PUT %s refusal echoed the value", tt.path)
			}
		})
	}
	if _, err := b.Server.Store.Credential(context.Background(), "fountain"); err == nil {
		t.Errorf("a refused PUT stored a fountain credential")
	}

	var owner operator.CredentialView
	decode(t, "PUT owner:alpha", b.Admin("PUT", "/api/credentials/owner:alpha", tok, admin.CredentialValue{Value: "sk-ant-oat01-setup"}), 200, &owner)
	if owner.Kind != "setup token" {
		t.Errorf("PUT owner:alpha kind = %q, want setup token", owner.Kind)
	}
	c, err := b.Server.Store.Credential(context.Background(), "owner:alpha")
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := b.Server.Keyring.Open(c.Sealed, payer.AD("owner:alpha")); err != nil || string(pt) != "sk-ant-oat01-setup" {
		t.Errorf("sealed owner:alpha opens to %q, %v, want the value set", pt, err)
	}

	if resp := b.Admin("DELETE", "/api/credentials/anthropic", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE anthropic = %d, want 204", resp.StatusCode)
	}
	refusal(t, "DELETE anthropic again", b.Admin("DELETE", "/api/credentials/anthropic", tok, nil), 404)
	if r := b.Do("POST", "/llm/anthropic/v1/messages", box, []byte(`{"model":"m","max_tokens":1,"messages":[]}`), nil); r.StatusCode != 403 {
		t.Errorf("messages after DELETE credential = %d, want 403 (no credential)", r.StatusCode)
	}
}

func TestAdmin_Secrets(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	b.AddBox("alpha")
	const value = "ghp_secretvalue123"

	var sv operator.SecretView
	resp := b.Admin("PUT", "/api/boxes/alpha/secrets/GITHUB", tok, operator.SecretValue{Host: "https://api.github.com/", Value: value})
	decode(t, "PUT GITHUB", resp, 200, &sv)
	if sv.Name != "GITHUB" || sv.Host != "https://api.github.com" {
		t.Errorf("PUT GITHUB = %+v, want GITHUB at https://api.github.com", sv)
	}
	if bytes.Contains(resp.Body, []byte(value)) {
		t.Errorf("PUT secret echoed the value")
	}
	sec, err := b.Server.Store.Secret(context.Background(), "alpha", "GITHUB")
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := b.Server.Keyring.Open(sec.Sealed, secrets.SecretAD("alpha", "GITHUB")); err != nil || string(pt) != value {
		t.Errorf("sealed secret opens to %q, %v, want the value set", pt, err)
	}

	var list operator.SecretList
	resp = b.Admin("GET", "/api/boxes/alpha/secrets", tok, nil)
	decode(t, "GET secrets", resp, 200, &list)
	if len(list.Secrets) != 1 || list.Secrets[0].Name != "GITHUB" || list.Secrets[0].Host != "https://api.github.com" {
		t.Errorf("GET secrets = %+v, want GITHUB", list.Secrets)
	}
	if bytes.Contains(resp.Body, []byte(value)) {
		t.Errorf("GET secrets shows the value")
	}

	bad := []struct {
		name, path string
		body       any
		status     int
	}{
		{"bad name", "/api/boxes/alpha/secrets/github", operator.SecretValue{Host: "https://x.example", Value: "v"}, 400},
		{"no host", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Value: "v"}, 400},
		{"host with credentials", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Host: "https://u:p@x.example", Value: "v"}, 400},
		{"host with query", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Host: "https://x.example/?a=b", Value: "v"}, 400},
		{"ftp host", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Host: "ftp://x.example", Value: "v"}, 400},
		{"short value", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Host: "https://x.example", Value: "short"}, 400},
		{"no value", "/api/boxes/alpha/secrets/OPENAI", operator.SecretValue{Host: "https://x.example"}, 400},
		{"no box", "/api/boxes/nobox/secrets/OPENAI", operator.SecretValue{Host: "https://x.example", Value: "v"}, 404},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			refusal(t, "PUT "+tt.path, b.Admin("PUT", tt.path, tok, tt.body), tt.status)
		})
	}

	if resp := b.Admin("DELETE", "/api/boxes/alpha/secrets/GITHUB", tok, nil); resp.StatusCode != 204 {
		t.Fatalf("DELETE GITHUB = %d, want 204", resp.StatusCode)
	}
	refusal(t, "DELETE GITHUB again", b.Admin("DELETE", "/api/boxes/alpha/secrets/GITHUB", tok, nil), 404)
}

// TestAdmin_SecretBodyFields: a PUT names the body fields the broker
// writes the value in, the listing shows them, and a field that is no
// sane name, named twice, or one too many is refused with a 400 saying
// why.
func TestAdmin_SecretBodyFields(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	b.AddBox("alpha")
	var sv operator.SecretView
	resp := b.Admin("PUT", "/api/boxes/alpha/secrets/OAUTH", tok, operator.SecretValue{Host: "https://auth.example.com", Value: "cs_secretvalue123", BodyFields: []string{"client_secret"}})
	decode(t, "PUT OAUTH", resp, 200, &sv)
	if len(sv.BodyFields) != 1 || sv.BodyFields[0] != "client_secret" {
		t.Errorf("PUT OAUTH = %+v, want bodyFields [client_secret]", sv)
	}
	sec, err := b.Server.Store.Secret(t.Context(), "alpha", "OAUTH")
	if err != nil || len(sec.BodyFields) != 1 || sec.BodyFields[0] != "client_secret" {
		t.Errorf("stored OAUTH = %+v, %v, want BodyFields [client_secret]", sec.BodyFields, err)
	}
	var list operator.SecretList
	decode(t, "GET secrets", b.Admin("GET", "/api/boxes/alpha/secrets", tok, nil), 200, &list)
	if len(list.Secrets) != 1 || len(list.Secrets[0].BodyFields) != 1 || list.Secrets[0].BodyFields[0] != "client_secret" {
		t.Errorf("GET secrets = %+v, want OAUTH with bodyFields [client_secret]", list.Secrets)
	}
	nine := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	tests := []struct {
		name   string
		fields []string
		says   string
	}{
		{"a space", []string{"client secret"}, "must match"},
		{"a comma", []string{"a,b"}, "must match"},
		{"empty", []string{""}, "must match"},
		{"named twice", []string{"key", "key"}, "twice"},
		{"too many", nine, "at most 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin("PUT", "/api/boxes/alpha/secrets/OTHER", tok, operator.SecretValue{Host: "https://x.example", Value: "cs_secretvalue123", BodyFields: tt.fields})
			refusal(t, "PUT OTHER", resp, 400)
			if !bytes.Contains(resp.Body, []byte(tt.says)) {
				t.Errorf("PUT OTHER with bodyFields %q = %s, want it to say %q", tt.fields, resp.Body, tt.says)
			}
		})
	}
}

func TestAdmin_FeedbackAndResources(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	alpha := b.AddBox("alpha")
	b.AddBox("beta")
	ctx := context.Background()
	for i, body := range []string{`{"entries":[{"n":1}]}`, `{"counts":{"up":2}}`, `not json`} {
		if _, err := b.Server.Store.AddFeedback(ctx, store.FeedbackBatch{Box: "alpha", At: time.Now().Add(time.Duration(i) * time.Second), Words: []string{"agent"}, Body: []byte(body)}, token.Hash(alpha), store.FeedbackBound{}); err != nil {
			t.Fatal(err)
		}
	}
	var fl admin.FeedbackList
	decode(t, "GET feedback", b.Admin("GET", "/api/boxes/alpha/feedback?limit=2", tok, nil), 200, &fl)
	if fl.Count != 3 || len(fl.Batches) != 2 {
		t.Fatalf("GET feedback?limit=2 = %d batches of %d, want 2 of 3", len(fl.Batches), fl.Count)
	}
	var second bytes.Buffer
	if err := json.Compact(&second, fl.Batches[1].Body); err != nil {
		t.Fatal(err)
	}
	if string(fl.Batches[0].Body) != `"not json"` || second.String() != `{"counts":{"up":2}}` {
		t.Errorf("GET feedback bodies = %s, %s, want newest first, non-JSON as a string", fl.Batches[0].Body, second.String())
	}
	refusal(t, "GET feedback?limit=0", b.Admin("GET", "/api/boxes/alpha/feedback?limit=0", tok, nil), 400)
	refusal(t, "GET feedback of no box", b.Admin("GET", "/api/boxes/nobox/feedback", tok, nil), 404)

	var rv operator.ResourceView
	decode(t, "POST resource", b.Admin("POST", "/api/boxes/alpha/resources", tok, operator.NewResource{Kind: "vault", ID: "v-1"}), 201, &rv)
	if owner, err := b.Server.Store.ResourceOwner(ctx, "vault", "v-1"); err != nil || owner != "alpha" {
		t.Errorf("ResourceOwner(vault, v-1) = %q, %v, want alpha", owner, err)
	}
	refusal(t, "POST another box's resource", b.Admin("POST", "/api/boxes/beta/resources", tok, operator.NewResource{Kind: "vault", ID: "v-1"}), 409)
	refusal(t, "POST bad kind", b.Admin("POST", "/api/boxes/alpha/resources", tok, operator.NewResource{Kind: "disk", ID: "d"}), 400)
	refusal(t, "POST bad id", b.Admin("POST", "/api/boxes/alpha/resources", tok, operator.NewResource{Kind: "vault", ID: "a b"}), 400)
	var rl operator.ResourceList
	decode(t, "GET resources", b.Admin("GET", "/api/boxes/alpha/resources", tok, nil), 200, &rl)
	if len(rl.Resources) != 1 || rl.Resources[0].ID != "v-1" {
		t.Errorf("GET resources = %+v, want vault v-1", rl.Resources)
	}
	refusal(t, "DELETE through another box", b.Admin("DELETE", "/api/boxes/beta/resources/vault/v-1", tok, nil), 404)
	if resp := b.Admin("DELETE", "/api/boxes/alpha/resources/vault/v-1", tok, nil); resp.StatusCode != 204 {
		t.Errorf("DELETE resource = %d %s, want 204", resp.StatusCode, resp.Body)
	}
	refusal(t, "DELETE resource again", b.Admin("DELETE", "/api/boxes/alpha/resources/vault/v-1", tok, nil), 404)
}
