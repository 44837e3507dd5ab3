package adminclient_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/operator"
)

// TestClient_CredentialKindInTheBody sets each of the four Anthropic
// credentials as a cloud account: the kind and the account's JSON go in
// the request's JSON body, as sent, and nowhere in its URL or headers.
// An anthropic key's body names no kind, as a broker from before kinds
// takes it.
func TestClient_CredentialKindInTheBody(t *testing.T) {
	const account = "{\n  \"region\": \"us-east-1\",\n  \"access_key_id\": \"AKIACLIENTKIND000001\",\n  \"secret_access_key\": \"client/kind+SECRET0123456789\"\n}\n"
	type seen struct {
		method, url string
		header      http.Header
		body        map[string]any
	}
	var mu sync.Mutex
	var got []seen
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.String(), r.Header.Clone(), m})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer ts.Close()
	c, err := adminclient.New(ts.URL, "bba_test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.SetCredential(ctx, "anthropic", "bedrock", []byte(account)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPoolEntry(ctx, "cloudy", "bedrock", 2, "", []byte(account)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPayer(ctx, "alpha", operator.PayerSetting{Kind: "owner", CredentialKind: "bedrock", Value: account}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetVisitor(ctx, "github:ann", "bedrock", []byte(account)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetCredential(ctx, "anthropic", "anthropic", []byte("sk-ant-api03-CLIENTKIND")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPayer(ctx, "alpha", operator.PayerSetting{Kind: "owner", CredentialKind: "anthropic", Value: "sk-ant-api03-CLIENTKIND"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("%d requests, want 6", len(got))
	}
	for i, member := range []string{"kind", "credentialKind"} {
		g := got[4+i]
		if _, ok := g.body[member]; ok || g.body["value"] != "sk-ant-api03-CLIENTKIND" {
			t.Errorf("%s with an anthropic key: body %v, want the value and no %s", g.url, g.body, member)
		}
	}
	got = got[:4]
	want := []struct{ url, kindMember string }{
		{"/api/credentials/anthropic", "kind"},
		{"/api/credentials/pool/cloudy", "kind"},
		{"/api/boxes/alpha/payer", "credentialKind"},
		{"/api/visitors/github:ann", "kind"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.method != "PUT" || g.url != w.url {
			t.Errorf("request %d = %s %s, want PUT %s", i, g.method, g.url, w.url)
		}
		if g.body[w.kindMember] != "bedrock" || g.body["value"] != account {
			t.Errorf("%s: body %v, want %s bedrock and the account as read in value", w.url, g.body, w.kindMember)
		}
		var hd strings.Builder
		_ = g.header.Write(&hd)
		if strings.Contains(g.url+hd.String(), "SECRET0123456789") || strings.Contains(g.url+hd.String(), "AKIACLIENTKIND") {
			t.Errorf("%s: the account is in the URL or a header", w.url)
		}
	}
}
