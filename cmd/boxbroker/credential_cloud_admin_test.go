package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// TestCredential_CloudKindsThroughTheAdminAPI runs `credential set
// anthropic`, `credential add anthropic NAME`, `box payer NAME owner` and
// `visitor set PRINCIPAL`, each with --kind bedrock and with --kind
// vertex, through a running broker's admin API (--admin-url): each
// account the broker stores then pays a box's call through the cloud (a
// cloudtest stand-in), `credential list` says its kind, and neither the
// commands' output nor the broker's logs hold any of the account's
// secrets.
func TestCredential_CloudKindsThroughTheAdminAPI(t *testing.T) {
	for _, kind := range []string{cloud.KindBedrock, cloud.KindVertex} {
		t.Run(kind, func(t *testing.T) { testCloudKindThroughTheAdminAPI(t, kind) })
	}
}

func testCloudKindThroughTheAdminAPI(t *testing.T, kind string) {
	c := cloudtest.New(t, kind, nil)
	tr := c.Transport()
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs, ServerOptions: func(o *server.Options) { o.Transport = tr }})
	alpha := b.AddBox("alpha")
	beta := b.AddBox("beta")
	for _, tok := range []string{alpha, beta} {
		b.Report(tok, brokertest.Entry(protocol.Inference, "agent"))
	}
	// The account as an operator keeps it in a file: indented, over lines.
	var indented bytes.Buffer
	if err := json.Indent(&indented, []byte(c.Credential), "", "  "); err != nil {
		t.Fatal(err)
	}
	account := indented.String() + "\n"
	var region struct {
		Region string `json:"region"`
	}
	_ = json.Unmarshal([]byte(c.Credential), &region)
	said := cloud.Name(kind) + " account in " + region.Region

	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	cli := func(stdin string, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runEnv(t, remote, stdin, args...)
		if code != 0 {
			t.Fatalf("boxbroker %s = %d %q %q, want 0", strings.Join(args, " "), code, out, errs)
		}
		c.NoSecret(t, "boxbroker "+strings.Join(args, " "), out+errs)
		return out, errs
	}
	// paid makes a call as the box with token (and grant) and checks the
	// cloud, not the Anthropic API, answered it, paid by payer.
	paid := func(token, grant, want string) {
		t.Helper()
		before := c.Calls()
		resp, _ := b.Call(t, token, grant)
		if resp.StatusCode != 200 || resp.Header.Get(protocol.HeaderPayer) != want || c.Calls() != before+1 {
			t.Fatalf("call = %d paid by %q, %d calls reached the %s stand-in; want 200 paid by %q, one call: %s",
				resp.StatusCode, resp.Header.Get(protocol.HeaderPayer), c.Calls()-before, kind, want, resp.Body)
		}
		if n := len(b.Upstream.Seen()); n != 0 {
			t.Fatalf("the Anthropic API got %d calls, want none", n)
		}
	}

	if out, _ := cli(account, "credential", "set", "anthropic", "--kind", kind); !strings.Contains(out, "set anthropic credential ("+said) {
		t.Errorf("credential set anthropic --kind %s = %q, want it to say %q", kind, out, said)
	}
	paid(alpha, "", protocol.PayerShared)

	// With the shared credential removed, the pool's one entry pays.
	cli("", "credential", "remove", "anthropic", "--yes")
	if out, _ := cli(account, "credential", "add", "anthropic", "cloudy", "--kind", kind, "--weight", "2"); !strings.Contains(out, said) || !strings.Contains(out, "weight 2") {
		t.Errorf("credential add anthropic cloudy --kind %s = %q, want it to say %q, weight 2", kind, out, said)
	}
	paid(alpha, "", protocol.PayerShared)

	if out, errs := cli(account, "box", "payer", "beta", "owner", "--kind", kind); !strings.Contains(errs, said) || !strings.Contains(out, "paid by: owner") {
		t.Errorf("box payer beta owner --kind %s = %q %q, want it to say %q", kind, out, errs, said)
	}
	paid(beta, "", protocol.PayerOwner)

	if out, _ := cli(account, "visitor", "set", "github:ann", "--kind", kind); !strings.Contains(out, said) {
		t.Errorf("visitor set github:ann --kind %s = %q, want it to say %q", kind, out, said)
	}
	out, _ := cli("", "grant", "issue", "alpha", "github:ann")
	paid(alpha, strings.TrimSpace(out), "visitor github:ann")

	out, _ = cli("", "credential", "list")
	for _, row := range []string{payer.OwnerAnthropic("beta"), payer.VisitorAnthropic("github:ann"), "cloudy"} {
		if !strings.Contains(out, row) {
			t.Errorf("credential list = %q, want a row for %s", out, row)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if (strings.HasPrefix(line, "owner:") || strings.HasPrefix(line, "visitor:") || strings.HasPrefix(line, "cloudy")) && !strings.Contains(line, cloud.Name(kind)) {
			t.Errorf("credential list: %q does not say %s", line, cloud.Name(kind))
		}
	}
	c.NoSecret(t, "the broker's logs", logs.String())
}

// TestCredential_CloudKindRefusedThroughTheAdminAPI sends accounts that
// are not ones through --admin-url: the broker refuses each with a 400
// that names what is at fault and quotes none of it, and stores nothing.
func TestCredential_CloudKindRefusedThroughTheAdminAPI(t *testing.T) {
	var logs brokertest.Buffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs})
	b.AddBox("alpha")
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	const secret = "AWSSECRET/cliadmin+0123456789abcdefghijk"
	noSecretKey := `{"region":"us-east-1","access_key_id":"AKIACLIADMIN00000001"}`
	notJSON := `{"region":"us-east-1","secret_access_key":` + secret + `}`
	roleARN := `{"region":"us-east-1","role_arn":"arn:aws:iam::1:role/r","secret_access_key":"` + secret + `"}`
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		say   []string
	}{
		{"set, not JSON", notJSON, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, []string{"(400)", "not valid JSON"}},
		{"add, no secret key", noSecretKey, []string{"credential", "add", "anthropic", "x", "--kind", "bedrock"}, 1, []string{"(400)", "needs access_key_id and secret_access_key"}},
		{"payer, bedrock as vertex", `{"region":"us-east5","access_key_id":"AKIACLIADMIN00000001","secret_access_key":"` + secret + `"}`,
			[]string{"box", "payer", "alpha", "owner", "--kind", "vertex"}, 1, []string{"(400)", "belong to a bedrock credential"}},
		{"visitor, role_arn", roleARN, []string{"visitor", "set", "github:ann", "--kind", "bedrock"}, 1, []string{"(400)", "role_arn"}},
		{"JSON with no kind", `{"region":"us-east-1","secret_access_key":"` + secret + `"}`, []string{"credential", "set", "anthropic"}, 1, []string{"(400)", "bedrock or vertex"}},
		{"unknown kind", noSecretKey, []string{"visitor", "set", "github:ann", "--kind", "azure"}, 2, []string{"--kind is one of anthropic, bedrock, vertex"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, remote, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("%v = %d %q %q, want %d", tt.args, code, out, errs, tt.code)
			}
			for _, want := range tt.say {
				if !strings.Contains(errs, want) {
					t.Errorf("%v said %q, want %q", tt.args, errs, want)
				}
			}
			if strings.Contains(out+errs, secret) {
				t.Errorf("%v echoed the secret: %q %q", tt.args, out, errs)
			}
		})
	}
	if creds, err := b.Server.Store.ListCredentials(t.Context()); err != nil || len(creds) != 0 {
		t.Errorf("credentials after refusals = %+v, %v, want none", creds, err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the broker's logs hold a refused value")
	}
}

// TestCredential_JSONIsNoAnthropicKey refuses, on the store as through
// the admin API (operator.CheckCredential, the one check both make), a cloud
// account's JSON given with no --kind: the broker would read it as an
// account that was never checked.
func TestCredential_JSONIsNoAnthropicKey(t *testing.T) {
	dir := t.TempDir()
	const secret = "AWSSECRET/jsonkey+0123456789abcdefghijk"
	account := `{"kind":"bedrock","region":"us-east-1","access_key_id":"AKIAJSONKEY000000001","secret_access_key":"` + secret + `"}`
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	for _, args := range [][]string{
		{"credential", "set", "anthropic"},
		{"credential", "add", "anthropic", "x"},
		{"box", "payer", "salad", "owner"},
		{"visitor", "set", "github:ann"},
	} {
		out, errs, code := run(t, dir, account+"\n", args...)
		if code != 1 || !strings.Contains(errs, "bedrock or vertex") || strings.Contains(out+errs, secret) {
			t.Errorf("%v with a cloud account's JSON = %d %q %q, want 1 saying to give its kind", args, code, out, errs)
		}
	}
	if out, _, _ := run(t, dir, "", "credential", "list"); strings.Contains(out, "anthropic") || strings.Contains(out, "visitor:") || strings.Contains(out, "owner:") {
		t.Errorf("credential list after refusals = %q, want nothing set", out)
	}
}
