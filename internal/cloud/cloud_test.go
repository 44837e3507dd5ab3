package cloud

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

func bedrockJSON(extra string) string {
	return `{"region":"us-east-1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` + secret + `"` + extra + `}`
}

func vertexKey(t *testing.T) map[string]string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	return map[string]string{"type": "service_account", "project_id": "my-project-123", "private_key_id": "abc",
		"private_key": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "client_email": "b@my-project-123.iam.gserviceaccount.com",
		"token_uri": "https://oauth2.googleapis.com/token"}
}

func TestCheck(t *testing.T) {
	sa := vertexKey(t)
	vertex := func(mod func(m map[string]any)) string {
		m := map[string]any{"region": "us-east5", "service_account": sa}
		if mod != nil {
			mod(m)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name, kind, raw, wantErr string
	}{
		{"bedrock", KindBedrock, bedrockJSON(""), ""},
		{"bedrock with session and endpoint", KindBedrock, bedrockJSON(`,"session_token":"tok","endpoint":"https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com","models":{"claude-sonnet-4-5":"us.anthropic.claude-sonnet-4-5-20250929-v1:0"}`), ""},
		{"bedrock role_arn", KindBedrock, bedrockJSON(`,"role_arn":"arn:aws:iam::1:role/x"`), "not yet supported"},
		{"bedrock no region", KindBedrock, `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` + secret + `"}`, "needs region"},
		{"bedrock bad key id", KindBedrock, `{"region":"us-east-1","access_key_id":"` + secret + `","secret_access_key":"x"}`, "access_key_id is not"},
		{"bedrock http endpoint", KindBedrock, bedrockJSON(`,"endpoint":"http://example.com"`), "https"},
		{"bedrock unknown member", KindBedrock, bedrockJSON(`,"secret":"` + secret + `"`), "does not know"},
		{"bedrock not JSON", KindBedrock, `region=us-east-1 ` + secret, "not valid JSON"},
		{"bedrock wrong kind", KindBedrock, bedrockJSON(`,"kind":"vertex"`), "--kind is bedrock"},
		{"vertex", KindVertex, vertex(nil), ""},
		{"vertex no key", KindVertex, `{"region":"us-east5"}`, "needs service_account"},
		{"vertex no region", KindVertex, vertex(func(m map[string]any) { delete(m, "region") }), "needs region"},
		{"vertex bad key", KindVertex, vertex(func(m map[string]any) {
			k := map[string]string{}
			for a, b := range sa {
				k[a] = b
			}
			k["private_key"] = "-----BEGIN PRIVATE KEY-----\n" + secret + "\n-----END PRIVATE KEY-----\n"
			m["service_account"] = k
		}), "not an RSA private key"},
		{"vertex given aws keys", KindVertex, vertex(func(m map[string]any) { m["secret_access_key"] = secret }), "belong to a bedrock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Check(tt.kind, []byte(tt.raw))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Check = %v", err)
				}
				c, err := Parse(got)
				if err != nil || c.Kind != tt.kind || !Is(got) || bytes.ContainsAny(got, "\r\n") {
					t.Errorf("Check = %s, which Parse reads as %+v, %v", got, c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Check = %v, want an error saying %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "EXAMPLEKEY") {
				t.Errorf("Check's error echoes the secret: %v", err)
			}
		})
	}
}

func TestIs(t *testing.T) {
	for _, v := range []string{"sk-ant-api03-x", "sk-ant-oat01-x", ""} {
		if Is([]byte(v)) {
			t.Errorf("Is(%q) = true, want false", v)
		}
	}
}

func TestModelID(t *testing.T) {
	b := &Credential{Kind: KindBedrock, Models: map[string]string{"claude-sonnet-4-5": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}}
	v := &Credential{Kind: KindVertex}
	tests := []struct {
		c      *Credential
		model  string
		want   string
		wantOK bool
	}{
		{b, "claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{b, "claude-haiku-4-5", "anthropic.claude-haiku-4-5-20251001-v1:0", true},
		{b, "anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-haiku-4-5-20251001-v1:0", true},
		{b, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{b, "anthropic.claude-x-v1:0", "", false},
		{b, "gpt-4", "", false},
		{v, "claude-sonnet-4-5", "claude-sonnet-4-5@20250929", true},
		{v, "claude-opus-4-1@20250805", "claude-opus-4-1@20250805", true},
		{v, "claude-x@1/../../y", "", false},
		{v, "claude-x@1", "", false},
	}
	for _, tt := range tests {
		got, ok := tt.c.ModelID(tt.model)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ModelID(%s, %q) = %q, %v, want %q, %v", tt.c.Kind, tt.model, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAWSStatus(t *testing.T) {
	tests := []struct {
		code   string
		status int
		want   int
		typ    string
	}{
		{"ThrottlingException", 429, 429, typeRateLimit},
		{"throttlingException", 0, 429, typeRateLimit},
		{"ServiceUnavailableException", 503, 529, typeOverloaded},
		{"ModelNotReadyException", 429, 529, typeOverloaded},
		{"AccessDeniedException", 403, 403, typePermission},
		{"ValidationException", 400, 400, typeInvalid},
		{"ResourceNotFoundException", 404, 404, typeNotFound},
		{"InternalServerException", 500, 500, typeAPI},
		{"", 503, 529, typeOverloaded},
	}
	for _, tt := range tests {
		if got, typ := awsStatus(tt.code, tt.status); got != tt.want || typ != tt.typ {
			t.Errorf("awsStatus(%q, %d) = %d %s, want %d %s", tt.code, tt.status, got, typ, tt.want, tt.typ)
		}
	}
}

// TestEventReader_ExceptionEndsTheStreamWithAnErrorEvent: an exception
// in Bedrock's stream is the Anthropic error event, and the stream's end.
func TestEventReader_ExceptionEndsTheStreamWithAnErrorEvent(t *testing.T) {
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	var hs eventstream.Headers
	hs.Set(":message-type", eventstream.StringValue("event"))
	hs.Set(":event-type", eventstream.StringValue("chunk"))
	payload, _ := json.Marshal(map[string][]byte{"bytes": []byte(`{"type":"message_start","message":{}}`)})
	_ = enc.Encode(&buf, eventstream.Message{Headers: hs, Payload: payload})
	var ex eventstream.Headers
	ex.Set(":message-type", eventstream.StringValue("exception"))
	ex.Set(":exception-type", eventstream.StringValue("throttlingException"))
	_ = enc.Encode(&buf, eventstream.Message{Headers: ex, Payload: []byte(`{"message":"slow down"}`)})
	got, err := io.ReadAll(newEventReader(io.NopCloser(&buf)))
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n" +
		"event: error\ndata: {\"error\":{\"message\":\"Amazon Bedrock's stream ended with an error (throttlingException): slow down\",\"type\":\"rate_limit_error\"},\"type\":\"error\"}\n\n"
	if string(got) != want {
		t.Errorf("read %q, want %q", got, want)
	}
}

func TestVertexError(t *testing.T) {
	resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]`))}
	out := vertexError(resp)
	b, _ := io.ReadAll(out.Body)
	if out.StatusCode != 429 || !strings.Contains(string(b), `"rate_limit_error"`) || !strings.Contains(string(b), "Quota exceeded") {
		t.Errorf("vertexError = %d %s", out.StatusCode, b)
	}
}
