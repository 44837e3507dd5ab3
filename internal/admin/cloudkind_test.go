package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// TestAdmin_CloudKinds sets the shared credential, a pool entry, an
// owner's and a visitor's as a Bedrock and as a Vertex AI account through
// the admin API: each is sealed as `boxbroker credential set --kind` seals
// it (it opens to cloud.Check's form), the lists say its kind, the shared
// one pays a box's call through the cloud, and no answer or log line
// holds any of the account's secrets.
func TestAdmin_CloudKinds(t *testing.T) {
	for _, kind := range []string{cloud.KindBedrock, cloud.KindVertex} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			tr := c.Transport()
			var logs brokertest.Buffer
			b := brokertest.New(t, brokertest.Options{Logs: &logs, ServerOptions: func(o *server.Options) { o.Transport = tr }})
			ctx := context.Background()
			tok := b.AdminToken
			box := b.AddBox("alpha")
			b.AddBox("beta")
			b.Report(box, brokertest.Entry(protocol.Inference, "agent"))
			name := cloud.Name(kind)
			var answers strings.Builder
			put := func(path string, body any) brokertest.Response {
				t.Helper()
				resp := b.Admin("PUT", path, tok, body)
				answers.Write(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("PUT %s = %d %s, want 200", path, resp.StatusCode, resp.Body)
				}
				return resp
			}
			opens := func(id string, sealed []byte, ad string) {
				t.Helper()
				v, err := b.Server.Keyring.Open(sealed, ad)
				if err != nil || string(v) != c.Sealed {
					t.Errorf("%s opens to %d bytes, %v; want cloud.Check's form of the account", id, len(v), err)
				}
			}

			var cv operator.CredentialView
			decode(t, "PUT /api/credentials/anthropic", put("/api/credentials/anthropic", admin.CredentialValue{Kind: kind, Value: c.Credential}), 200, &cv)
			if cv.Kind != name {
				t.Errorf("PUT /api/credentials/anthropic kind = %q, want %q", cv.Kind, name)
			}
			cr, err := b.Server.Store.Credential(ctx, payer.SharedAnthropic)
			if err != nil {
				t.Fatal(err)
			}
			opens("the shared credential", cr.Sealed, payer.AD(payer.SharedAnthropic))
			before := c.Calls()
			if resp, _ := b.Call(t, box, ""); resp.StatusCode != 200 || c.Calls() != before+1 {
				t.Fatalf("a call paid by the shared %s account = %d (%d calls reached it, want %d): %s", kind, resp.StatusCode, c.Calls(), before+1, resp.Body)
			}
			if n := len(b.Upstream.Seen()); n != 0 {
				t.Errorf("the Anthropic API got %d calls, want none", n)
			}

			var pv operator.PoolEntryView
			decode(t, "PUT /api/credentials/pool/gcp", put("/api/credentials/pool/gcp", operator.PoolEntryValue{Kind: kind, Value: c.Credential, Weight: 2}), 200, &pv)
			if pv.Kind != name || pv.Weight != 2 {
				t.Errorf("PUT /api/credentials/pool/gcp = %+v, want kind %q weight 2", pv, name)
			}
			entries, err := b.Server.Store.PoolEntries(ctx)
			if err != nil || len(entries) != 1 {
				t.Fatalf("pool entries = %+v, %v", entries, err)
			}
			opens("pool entry gcp", entries[0].Sealed, pool.AD("gcp"))

			var bv operator.BoxView
			decode(t, "PUT /api/boxes/beta/payer", put("/api/boxes/beta/payer", operator.PayerSetting{Kind: "owner", CredentialKind: kind, Value: c.Credential}), 200, &bv)
			if bv.Payer.Kind != "owner" {
				t.Errorf("PUT /api/boxes/beta/payer = %+v, want owner", bv.Payer)
			}
			cr, err = b.Server.Store.Credential(ctx, payer.OwnerAnthropic("beta"))
			if err != nil {
				t.Fatal(err)
			}
			opens("beta's owner's credential", cr.Sealed, payer.AD(payer.OwnerAnthropic("beta")))

			var vv operator.VisitorView
			decode(t, "PUT /api/visitors/github:ann", put("/api/visitors/github:ann", admin.CredentialValue{Kind: kind, Value: c.Credential}), 200, &vv)
			if vv.Kind != name {
				t.Errorf("PUT /api/visitors/github:ann kind = %q, want %q", vv.Kind, name)
			}
			cr, err = b.Server.Store.Credential(ctx, payer.VisitorAnthropic("github:ann"))
			if err != nil {
				t.Fatal(err)
			}
			opens("ann's credential", cr.Sealed, payer.AD(payer.VisitorAnthropic("github:ann")))

			var cl admin.CredentialList
			resp := b.Admin("GET", "/api/credentials", tok, nil)
			answers.Write(resp.Body)
			decode(t, "GET /api/credentials", resp, 200, &cl)
			kinds := map[string]string{}
			for _, v := range cl.Credentials {
				kinds[v.ID] = v.Kind
			}
			for _, id := range []string{payer.SharedAnthropic, payer.OwnerAnthropic("beta"), payer.VisitorAnthropic("github:ann")} {
				if kinds[id] != name {
					t.Errorf("GET /api/credentials: %s is of kind %q, want %q (%s)", id, kinds[id], name, resp.Body)
				}
			}
			var pl operator.PoolList
			resp = b.Admin("GET", "/api/credentials/pool", tok, nil)
			answers.Write(resp.Body)
			decode(t, "GET /api/credentials/pool", resp, 200, &pl)
			for _, e := range pl.Entries {
				if e.Kind != name {
					t.Errorf("GET /api/credentials/pool: entry %s is of kind %q, want %q", e.Name, e.Kind, name)
				}
			}
			var vl operator.VisitorList
			resp = b.Admin("GET", "/api/visitors", tok, nil)
			answers.Write(resp.Body)
			decode(t, "GET /api/visitors", resp, 200, &vl)
			if len(vl.Visitors) != 1 || vl.Visitors[0].Kind != name {
				t.Errorf("GET /api/visitors = %+v, want ann with kind %q", vl.Visitors, name)
			}

			c.NoSecret(t, "the admin API's answers", answers.String())
			c.NoSecret(t, "the broker's logs", logs.String())
			if !strings.Contains(logs.String(), name) {
				t.Errorf("the logs say no credential of kind %s was set", name)
			}
		})
	}
}

// TestAdmin_CloudKindRefused refuses, on each route that sets an
// Anthropic credential, a cloud account that is not one with a 400 naming
// what is at fault and quoting none of the value, an unknown kind with a
// 400 naming the kinds, and a kind where none is taken; nothing is stored.
func TestAdmin_CloudKindRefused(t *testing.T) {
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs})
	tok := b.AdminToken
	b.AddBox("alpha")
	ctx := context.Background()
	c := cloudtest.New(t, cloud.KindVertex, nil)
	const secret = "AWSSECRET/adminkind+0123456789abcdefghij"
	const keyID = "AKIAADMINKIND0000001"
	account := func(m map[string]any) string {
		j, _ := json.Marshal(m)
		return string(j)
	}
	noSecretKey := account(map[string]any{"region": "us-east-1", "access_key_id": keyID})
	badKeyID := account(map[string]any{"region": "us-east-1", "access_key_id": "not-" + secret, "secret_access_key": secret})
	badRegion := account(map[string]any{"region": "Mars " + secret, "access_key_id": keyID, "secret_access_key": secret})
	unknownRegion := account(map[string]any{"region": "us-east", "access_key_id": keyID, "secret_access_key": secret})
	unknownMember := account(map[string]any{"region": "us-east-1", "access_key_id": keyID, "secret_access_key": secret, "password": secret})
	notJSON := `{"region":"us-east-1","secret_access_key":` + secret + `}`
	truncated := `{"region":"us-east-1","secret_access_key":"` + secret + `"`
	good := account(map[string]any{"region": "us-east-1", "access_key_id": keyID, "secret_access_key": secret})

	routes := []struct {
		path   string
		member string // the body's kind member
		body   func(kind, value string) any
	}{
		{"/api/credentials/anthropic", "kind", func(k, v string) any { return admin.CredentialValue{Kind: k, Value: v} }},
		{"/api/credentials/pool/team", "kind", func(k, v string) any { return operator.PoolEntryValue{Kind: k, Value: v} }},
		{"/api/boxes/alpha/payer", "credentialKind", func(k, v string) any {
			return operator.PayerSetting{Kind: "owner", CredentialKind: k, Value: v}
		}},
		{"/api/visitors/github:ann", "kind", func(k, v string) any { return admin.CredentialValue{Kind: k, Value: v} }},
	}
	bad := []struct {
		name, kind, value string
		say               []string // each in the message
	}{
		{"not JSON", "bedrock", notJSON, []string{"not valid JSON", "at byte"}},
		{"truncated", "bedrock", truncated, []string{"not a JSON object"}},
		{"no secret key", "bedrock", noSecretKey, []string{"needs access_key_id and secret_access_key"}},
		{"bad access key id", "bedrock", badKeyID, []string{"access_key_id"}},
		{"bad region", "bedrock", badRegion, []string{"region"}},
		{"unknown region", "bedrock", unknownRegion, []string{`region "us-east" is no AWS region the broker knows`, cloud.BedrockRegionsURL}},
		{"unknown member", "bedrock", unknownMember, []string{`"password"`}},
		{"vertex account as bedrock", "bedrock", c.Credential, []string{"belong to a vertex credential"}},
		{"bedrock account as vertex", "vertex", good, []string{"belong to a bedrock credential"}},
		{"empty", "vertex", "", []string{"value"}},
		{"unknown kind", "azure", good, []string{"is one of anthropic, bedrock, vertex"}},
		{"JSON as an anthropic key", "", good, []string{"bedrock or vertex"}},
		{"JSON as an anthropic key, said", "anthropic", good, []string{"bedrock or vertex"}},
	}
	for _, rt := range routes {
		for _, tt := range bad {
			t.Run(rt.path+"/"+tt.name, func(t *testing.T) {
				resp := b.Admin("PUT", rt.path, tok, rt.body(tt.kind, tt.value))
				msg := refusal(t, "PUT "+rt.path, resp, http.StatusBadRequest)
				for _, want := range tt.say {
					if !strings.Contains(msg, want) {
						t.Errorf("PUT %s %s = %q, want it to say %q", rt.path, tt.name, msg, want)
					}
				}
				if tt.name == "unknown kind" && !strings.Contains(msg, rt.member) {
					t.Errorf("PUT %s %s = %q, want it to name %s", rt.path, tt.name, msg, rt.member)
				}
				for _, v := range append([]string{secret, "Mars", "not-AWS"}, c.Secrets...) {
					if strings.Contains(string(resp.Body), v) {
						t.Errorf("PUT %s %s: the refusal quotes the value: %s", rt.path, tt.name, resp.Body)
					}
				}
			})
		}
	}
	others := []struct {
		name, path string
		body       any
		status     int
		say        string
	}{
		{"fountain has no kind", "/api/credentials/fountain", admin.CredentialValue{Kind: "bedrock", Value: good}, 400, "fountain key is a bearer key"},
		{"a cloud pool entry takes no url", "/api/credentials/pool/team", operator.PoolEntryValue{Kind: "bedrock", Value: good, URL: "https://gw.example"}, 400, "endpoint goes in its JSON"},
		{"a shared payer has no credential kind", "/api/boxes/alpha/payer", operator.PayerSetting{Kind: "shared", CredentialKind: "bedrock"}, 400, "a shared payer has none"},
		{"over the body's bound", "/api/credentials/anthropic", admin.CredentialValue{Kind: "bedrock", Value: strings.Repeat(" ", admin.MaxBody) + good}, 413, "over"},
	}
	for _, tt := range others {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Admin("PUT", tt.path, tok, tt.body)
			if msg := refusal(t, "PUT "+tt.path, resp, tt.status); !strings.Contains(msg, tt.say) {
				t.Errorf("PUT %s = %q, want it to say %q", tt.path, msg, tt.say)
			}
			if strings.Contains(string(resp.Body), secret) {
				t.Errorf("PUT %s: the refusal quotes the value: %s", tt.path, resp.Body)
			}
		})
	}

	creds, err := b.Server.Store.ListCredentials(ctx)
	if err != nil || len(creds) != 0 {
		t.Errorf("credentials after refused PUTs = %+v, %v, want none", creds, err)
	}
	if es, err := b.Server.Store.PoolEntries(ctx); err != nil || len(es) != 0 {
		t.Errorf("pool entries after refused PUTs = %+v, %v, want none", es, err)
	}
	if bx, err := b.Server.Store.Box(ctx, "alpha"); err != nil || bx.PayerKind != protocol.PayerShared {
		t.Errorf("alpha after refused PUTs = %+v, %v, want shared-paid", bx, err)
	}
	for _, v := range append([]string{secret}, c.Secrets...) {
		if strings.Contains(logs.String(), v) {
			t.Errorf("the broker's logs hold a refused value")
		}
	}
}
