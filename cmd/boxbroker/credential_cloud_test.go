package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
)

// TestCredential_CloudKinds sets the shared credential, a pool entry, an
// owner's and a visitor's as cloud accounts, and refuses what is wrong
// with a cloud account's JSON without echoing any of its secrets.
func TestCredential_CloudKinds(t *testing.T) {
	dir := t.TempDir()
	const secret = "AWSSECRET/cloudcli+0123456789abcdefghijklmn"
	bedrock := `{"region":"us-west-2","access_key_id":"AKIACLOUDCLI00000001",
  "secret_access_key":"` + secret + `"}`
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	vb, _ := json.MarshalIndent(map[string]any{"region": "us-east5", "service_account": map[string]string{
		"type": "service_account", "project_id": "cloud-cli-123", "private_key_id": "kid", "private_key": pemKey,
		"client_email": "b@cloud-cli-123.iam.gserviceaccount.com"}}, "", "  ")
	vertex := string(vb)

	out, errs, code := run(t, dir, bedrock, "credential", "set", "anthropic", "--kind", "bedrock")
	if code != 0 || strings.Contains(out+errs, secret) || !strings.Contains(out, "Amazon Bedrock account in us-west-2") {
		t.Fatalf("credential set anthropic --kind bedrock = %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, dir, vertex, "credential", "add", "anthropic", "gcp", "--kind", "vertex")
	if code != 0 || strings.Contains(out+errs, "PRIVATE KEY") || !strings.Contains(out, "Google Vertex AI account in us-east5") {
		t.Fatalf("credential add anthropic gcp --kind vertex = %d %q %q", code, out, errs)
	}
	out, _, code = run(t, dir, "", "credential", "list")
	if code != 0 || strings.Contains(out, secret) || !strings.Contains(out, "Amazon Bedrock") || !strings.Contains(out, "Google Vertex AI") {
		t.Errorf("credential list = %d %q", code, out)
	}
	// A cloud entry's calls go to its account's endpoint, never to
	// --anthropic-url, and its row says so.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "gcp ") && !strings.Contains(line, "(the account's)") {
			t.Errorf("credential list's row of a Vertex AI entry = %q, want its URL as the account's", line)
		}
	}
	role := `{"region":"eu-west-1","access_key_id":"AKIACLOUDCLI00000001","secret_access_key":"` + secret + `",
  "role_arn":"arn:aws:iam::123456789012:role/broker","external_id":"ext-cli","profile":"eu","betas":["*"]}`
	out, errs, code = run(t, dir, role, "credential", "add", "anthropic", "aws-role", "--kind", "bedrock")
	if code != 0 || strings.Contains(out+errs, secret) || !strings.Contains(out, "Amazon Bedrock account in eu-west-1") {
		t.Fatalf("credential add anthropic aws-role --kind bedrock (role_arn) = %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, dir, bedrock, "visitor", "set", "github:ann", "--kind", "bedrock")
	if code != 0 || strings.Contains(out+errs, secret) || !strings.Contains(out, "Amazon Bedrock") {
		t.Errorf("visitor set --kind bedrock = %d %q %q", code, out, errs)
	}
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	out, errs, code = run(t, dir, vertex, "box", "payer", "salad", "owner", "--kind", "vertex")
	if code != 0 || strings.Contains(out+errs, "PRIVATE KEY") || !strings.Contains(errs, "Google Vertex AI account") || !strings.Contains(out, "paid by: owner") {
		t.Errorf("box payer owner --kind vertex = %d %q %q", code, out, errs)
	}

	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		say   string
	}{
		{"unknown kind", bedrock, []string{"credential", "set", "anthropic", "--kind", "azure"}, 2, "--kind is one of anthropic, bedrock, vertex"},
		{"fountain has no kind", bedrock, []string{"credential", "set", "fountain", "--kind", "bedrock"}, 2, "fountain key is a bearer"},
		{"not JSON", secret, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "not valid JSON"},
		{"role_arn without a key", `{"region":"us-east-1","role_arn":"arn:aws:iam::123456789012:role/r"}`, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "needs access_key_id and secret_access_key"},
		{"role_arn not an ARN", `{"region":"us-east-1","access_key_id":"AKIACLOUDCLI00000001","secret_access_key":"` + secret + `","role_arn":"r"}`, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "role_arn is not an IAM role's ARN"},
		{"unknown profile", `{"region":"us-east-1","access_key_id":"AKIACLOUDCLI00000001","secret_access_key":"` + secret + `","profile":"moon"}`, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "profile is the cross-region inference profile"},
		{"no secret", `{"region":"us-east-1","access_key_id":"AKIACLOUDCLI00000001"}`, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "needs access_key_id and secret_access_key"},
		{"vertex JSON as bedrock", vertex, []string{"credential", "set", "anthropic", "--kind", "bedrock"}, 1, "belong to a vertex credential"},
		{"url with a kind", bedrock, []string{"credential", "add", "anthropic", "x", "--kind", "bedrock", "--url", "https://h/"}, 2, "endpoint goes in its JSON"},
		{"shared payer has no kind", bedrock, []string{"box", "payer", "salad", "shared", "--kind", "bedrock"}, 2, "a shared payer has none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := run(t, dir, tt.stdin, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.say) {
				t.Errorf("%v = %d %q, want %d saying %q", tt.args, code, errs, tt.code, tt.say)
			}
			if strings.Contains(out+errs, secret) || strings.Contains(out+errs, "PRIVATE KEY") {
				t.Errorf("%v echoed a secret: %q %q", tt.args, out, errs)
			}
		})
	}
}
