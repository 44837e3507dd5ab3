package mint

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/store"
)

func TestParse_RefusesNamingTheField(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	goodPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	gh := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"app_id": 1, "installation_id": 2, "private_key": goodPEM}
		edit(m)
		return m
	}
	oa := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"token_url": "https://auth.example.com/token", "client_id": "c", "client_secret": "s", "refresh_token": "r"}
		edit(m)
		return m
	}
	aws := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "k", "region": "us-east-1", "service": "s3"}
		edit(m)
		return m
	}
	hm := func(edit func(m map[string]any)) map[string]any {
		m := map[string]any{"key": "0123456789abcdef", "header": "X-Signature"}
		edit(m)
		return m
	}
	tests := []struct {
		name, kind string
		config     any
		field      string // "" for none: accepted
	}{
		{"github-app ok", KindGitHubApp, gh(func(map[string]any) {}), ""},
		{"github-app ids as strings", KindGitHubApp, gh(func(m map[string]any) { m["app_id"], m["installation_id"] = "1", "2" }), ""},
		{"bad PEM", KindGitHubApp, gh(func(m map[string]any) {
			m["private_key"] = "-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----"
		}), "private_key"},
		{"missing private key", KindGitHubApp, gh(func(m map[string]any) { delete(m, "private_key") }), "private_key"},
		{"missing app id", KindGitHubApp, gh(func(m map[string]any) { delete(m, "app_id") }), "app_id"},
		{"app id not a number", KindGitHubApp, gh(func(m map[string]any) { m["app_id"] = "my-app" }), "app_id"},
		{"api_url http", KindGitHubApp, gh(func(m map[string]any) { m["api_url"] = "http://api.github.com" }), "api_url"},
		{"bad permission", KindGitHubApp, gh(func(m map[string]any) { m["permissions"] = map[string]string{"contents": "all"} }), "permissions"},
		{"repository with owner", KindGitHubApp, gh(func(m map[string]any) { m["repositories"] = []string{"o/r"} }), "repositories"},
		{"unknown member", KindGitHubApp, gh(func(m map[string]any) { m["repos"] = []string{"r"} }), "repos"},
		{"oauth2 ok", KindOAuth2, oa(func(map[string]any) {}), ""},
		{"client credentials ok", KindOAuth2, oa(func(m map[string]any) { delete(m, "refresh_token") }), ""},
		{"token_url http", KindOAuth2, oa(func(m map[string]any) { m["token_url"] = "http://auth.example.com/token" }), "token_url"},
		{"token_url with a user", KindOAuth2, oa(func(m map[string]any) { m["token_url"] = "https://u:p@auth.example.com/token" }), "token_url"},
		{"missing client id", KindOAuth2, oa(func(m map[string]any) { delete(m, "client_id") }), "client_id"},
		{"client credentials, no secret", KindOAuth2, oa(func(m map[string]any) { delete(m, "refresh_token"); delete(m, "client_secret") }), "client_secret"},
		{"refresh grant, no token", KindOAuth2, oa(func(m map[string]any) { delete(m, "refresh_token"); m["grant"] = "refresh_token" }), "refresh_token"},
		{"scope with a space", KindOAuth2, oa(func(m map[string]any) { m["scopes"] = []string{"a b"} }), "scopes"},
		{"scopes not an array", KindOAuth2, oa(func(m map[string]any) { m["scopes"] = "a" }), "scopes"},
		{"aws ok", KindSigV4, aws(func(map[string]any) {}), ""},
		{"unknown region", KindSigV4, aws(func(m map[string]any) { m["region"] = "us-esat-1" }), "region"},
		{"missing service", KindSigV4, aws(func(m map[string]any) { delete(m, "service") }), "service"},
		{"bad access key id", KindSigV4, aws(func(m map[string]any) { m["access_key_id"] = "not a key" }), "access_key_id"},
		{"hmac ok", KindHMAC, hm(func(map[string]any) {}), ""},
		{"short key", KindHMAC, hm(func(m map[string]any) { m["key"] = "short" }), "key"},
		{"bad header", KindHMAC, hm(func(m map[string]any) { m["header"] = "X Sig" }), "header"},
		{"bad algorithm", KindHMAC, hm(func(m map[string]any) { m["algorithm"] = "md5" }), "algorithm"},
		{"bad sign", KindHMAC, hm(func(m map[string]any) { m["sign"] = "everything" }), "sign"},
		// With two faults, the first checked is the one named.
		{"bad algorithm and sign", KindHMAC, hm(func(m map[string]any) { m["algorithm"], m["sign"] = "md5", "everything" }), "algorithm"},
		{"missing app id, bad PEM", KindGitHubApp, gh(func(m map[string]any) { delete(m, "app_id"); m["private_key"] = "nope" }), "app_id"},
		{"token_url http, no client id", KindOAuth2, oa(func(m map[string]any) { m["token_url"] = "http://a.example.com"; delete(m, "client_id") }), "token_url"},
		{"bad access key id, unknown region", KindSigV4, aws(func(m map[string]any) { m["access_key_id"], m["region"] = "not a key", "nowhere" }), "access_key_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.config)
			_, err := Parse(tt.kind, raw)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Parse(%s) = %v, want nil", tt.kind, err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Parse(%s) = %v, want a FieldError naming %q", tt.kind, err, tt.field)
			}
			for _, v := range []string{"nope", "0123456789abcdef"} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("the error %q repeats a value", err)
				}
			}
		})
	}
	if _, err := Parse("plain", []byte("{}")); err == nil {
		t.Errorf("Parse(unknown kind) = nil, want an error")
	}
	if _, err := Parse(KindHMAC, []byte("not json")); err == nil {
		t.Errorf("Parse(not JSON) = nil, want an error")
	}
}

func TestUsableUntil(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		expires time.Time
		want    time.Time
	}{
		{now.Add(time.Hour), now.Add(55 * time.Minute)},
		{now.Add(8 * time.Minute), now.Add(6 * time.Minute)},
		{time.Time{}, now.Add(unknownLife)},
		{now.Add(-time.Minute), now},
	}
	for _, tt := range tests {
		if got := usableUntil(now, Token{Expires: tt.expires}); !got.Equal(tt.want) {
			t.Errorf("usableUntil(expires %v) = %v, want %v", tt.expires, got, tt.want)
		}
	}
}

func TestState(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	sec := store.Secret{Name: "API", Kind: KindOAuth2, Sealed: []byte("sealed")}
	of := Of(sec.Sealed)
	tests := []struct {
		name   string
		sec    store.Secret
		states []store.MintState
		want   string
	}{
		{"plain", store.Secret{Name: "P"}, nil, ""},
		{"none", sec, nil, "not minted yet"},
		{"another configuration's", sec, []store.MintState{{Name: "API", Of: "old", ExpiresAt: now.Add(time.Hour)}}, "not minted yet"},
		{"valid", sec, []store.MintState{{Name: "API", Of: of, ExpiresAt: now.Add(time.Hour)}}, "token valid until 2026-05-01T13:00:00Z"},
		{"expired", sec, []store.MintState{{Name: "API", Of: of, ExpiresAt: now.Add(-time.Hour)}}, "token expired"},
		{"refused", sec, []store.MintState{{Name: "API", Of: of, Failure: "oauth2: the token endpoint refused (400 invalid_grant)", UpdatedAt: now}}, "REFUSED since 2026-05-01T12:00:00Z: the OAuth grant needs renewing"},
		{"signing", store.Secret{Name: "S3", Kind: KindSigV4}, nil, "signs each request"},
	}
	for _, tt := range tests {
		if got := State(tt.sec, tt.states, now); !strings.HasPrefix(got, tt.want) || (tt.want == "" && got != "") {
			t.Errorf("%s: State = %q, want it to begin %q", tt.name, got, tt.want)
		}
	}
}

// An AWS region is one thing to the broker: an aws-sigv4 secret's
// region and a Bedrock account's are taken and refused alike. On the
// code before, each had its own rule (a list here, a pattern in cloud),
// and a Bedrock account took a misspelt region the secret refused.
func TestAWSRegion_SigV4AndBedrockAgree(t *testing.T) {
	for _, region := range []string{"us-east-1", "eu-central-2", "us-gov-west-1", "cn-north-1", "us-esat-1", "eu-west-9", "useast1", "global"} {
		sig, _ := json.Marshal(map[string]any{"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "k", "region": region, "service": "bedrock"})
		_, serr := Parse(KindSigV4, sig)
		bed, _ := json.Marshal(map[string]any{"access_key_id": "AKIAIOSFODNN7EXAMPLE", "secret_access_key": "k", "region": region})
		_, berr := cloud.Check(cloud.KindBedrock, bed)
		if (serr == nil) != (berr == nil) {
			t.Errorf("region %q: Parse(aws-sigv4) = %v, cloud.Check(bedrock) = %v, want both to take it or both to refuse it", region, serr, berr)
		}
	}
}
