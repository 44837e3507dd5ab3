package cloud

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/intentius/boxbroker/internal/protocol"
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
		{"bedrock role_arn", KindBedrock, bedrockJSON(`,"role_arn":"arn:aws:iam::123456789012:role/x","external_id":"ext-1","sts_endpoint":"https://vpce-2.sts.us-east-1.vpce.amazonaws.com"`), ""},
		{"bedrock role_arn not an ARN", KindBedrock, bedrockJSON(`,"role_arn":"arn:aws:iam::1:role/x"`), "role_arn is not an IAM role's ARN"},
		{"bedrock role_arn without a key", KindBedrock, `{"region":"us-east-1","role_arn":"arn:aws:iam::123456789012:role/x"}`, "needs access_key_id and secret_access_key"},
		{"bedrock external_id without role_arn", KindBedrock, bedrockJSON(`,"external_id":"ext-1"`), "go with role_arn"},
		{"bedrock sts_endpoint http", KindBedrock, bedrockJSON(`,"role_arn":"arn:aws:iam::123456789012:role/x","sts_endpoint":"http://sts.example.com"`), "sts_endpoint: is an https"},
		{"bedrock profile", KindBedrock, bedrockJSON(`,"profile":"eu"`), ""},
		{"bedrock unknown profile", KindBedrock, bedrockJSON(`,"profile":"mars"`), "one of global, us, eu, apac, jp, au, us-gov"},
		{"bedrock betas", KindBedrock, bedrockJSON(`,"betas":["context-1m-2025-08-07","claude-code-20250219"]`), ""},
		{"bedrock all betas", KindBedrock, bedrockJSON(`,"betas":["*"]`), ""},
		{"bedrock no betas", KindBedrock, bedrockJSON(`,"betas":[]`), ""},
		{"bedrock betas with a comma", KindBedrock, bedrockJSON(`,"betas":["a,b"]`), "betas lists anthropic-beta values"},
		{"bedrock betas not a list", KindBedrock, bedrockJSON(`,"betas":"*"`), `"betas" member must be`},
		{"bedrock no region", KindBedrock, `{"access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` + secret + `"}`, "needs region"},
		{"bedrock unknown region", KindBedrock, `{"region":"useast1","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"` + secret + `"}`, `region "useast1" is no AWS region the broker knows: one is written as us-east-1`},
		{"bedrock secret as region", KindBedrock, `{"region":"` + secret + `","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"x"}`, "region ? is no AWS region the broker knows"},
		{"bedrock bad key id", KindBedrock, `{"region":"us-east-1","access_key_id":"` + secret + `","secret_access_key":"x"}`, "access_key_id is not"},
		{"bedrock http endpoint", KindBedrock, bedrockJSON(`,"endpoint":"http://example.com"`), "https"},
		{"bedrock unknown member", KindBedrock, bedrockJSON(`,"secret":"` + secret + `"`), "does not know"},
		{"bedrock not JSON", KindBedrock, `region=us-east-1 ` + secret, "not valid JSON"},
		{"bedrock wrong kind", KindBedrock, bedrockJSON(`,"kind":"vertex"`), "--kind is bedrock"},
		{"vertex", KindVertex, vertex(nil), ""},
		{"vertex no key", KindVertex, `{"region":"us-east5"}`, "needs service_account"},
		{"vertex no region", KindVertex, vertex(func(m map[string]any) { delete(m, "region") }), "needs region"},
		{"vertex unknown region", KindVertex, vertex(func(m map[string]any) { m["region"] = "us-east-5" }), `region "us-east-5" is no Vertex AI location the broker knows`},
		{"vertex bad key", KindVertex, vertex(func(m map[string]any) {
			k := map[string]string{}
			for a, b := range sa {
				k[a] = b
			}
			k["private_key"] = "-----BEGIN PRIVATE KEY-----\n" + secret + "\n-----END PRIVATE KEY-----\n"
			m["service_account"] = k
		}), "not an RSA private key"},
		{"vertex given aws keys", KindVertex, vertex(func(m map[string]any) { m["secret_access_key"] = secret }), "belong to a bedrock"},
		{"vertex given a profile", KindVertex, vertex(func(m map[string]any) { m["profile"] = "us" }), "belong to a bedrock"},
		{"vertex given a role", KindVertex, vertex(func(m map[string]any) { m["role_arn"] = "arn:aws:iam::123456789012:role/x" }), "belong to a bedrock"},
		{"vertex betas", KindVertex, vertex(func(m map[string]any) { m["betas"] = []string{"context-1m-2025-08-07"} }), ""},
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
		{"ThrottlingException", 429, 429, protocol.TypeRateLimit},
		{"throttlingException", 0, 429, protocol.TypeRateLimit},
		{"ServiceUnavailableException", 503, 529, protocol.TypeOverloaded},
		{"ModelNotReadyException", 429, 529, protocol.TypeOverloaded},
		{"AccessDeniedException", 403, 403, protocol.TypePermission},
		{"ValidationException", 400, 400, protocol.TypeInvalid},
		{"ResourceNotFoundException", 404, 404, protocol.TypeNotFound},
		{"InternalServerException", 500, 500, protocol.TypeAPI},
		{"", 503, 529, protocol.TypeOverloaded},
	}
	for _, tt := range tests {
		if got, typ := awsStatus(tt.code, tt.status), protocol.TypeOf(awsStatus(tt.code, tt.status)); got != tt.want || typ != tt.typ {
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
	got, err := io.ReadAll(newEventReader(io.NopCloser(&buf), nil))
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
	out := vertexError(429, []byte(`[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]`), nil)
	b, _ := io.ReadAll(out.Body)
	if out.StatusCode != 429 || !strings.Contains(string(b), `"rate_limit_error"`) || !strings.Contains(string(b), "Quota exceeded") {
		t.Errorf("vertexError = %d %s", out.StatusCode, b)
	}
}

// No cloud error reaches the box as a 401 or a 407, nor says
// authentication_error, whatever its shape: a box takes those as its own
// token refused. On the code before, an Anthropic-shaped 401 from a
// Vertex AI endpoint passed as it came.
func TestCloudErrors_NeverAnAuthenticationError(t *testing.T) {
	for _, status := range []int{400, 401, 403, 407, 429, 500, 503} {
		bodies := map[string][]byte{
			"anthropic": fmt.Appendf(nil, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key (%d)"}}`, status),
			"google":    fmt.Appendf(nil, `{"error":{"code":%d,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`, status),
			"other":     []byte(`<html>no</html>`),
		}
		for shape, b := range bodies {
			out := vertexError(status, b, nil)
			got, _ := io.ReadAll(out.Body)
			if out.StatusCode == 401 || out.StatusCode == 407 || strings.Contains(string(got), "authentication_error") {
				t.Errorf("Vertex AI's %d (%s shape) = %d %s, want no authentication refusal", status, shape, out.StatusCode, got)
			}
		}
		h := http.Header{"X-Amzn-Errortype": {"UnrecognizedClientException"}}
		out := bedrockError(status, h, []byte(`{"message":"The security token included in the request is invalid."}`), nil)
		got, _ := io.ReadAll(out.Body)
		if out.StatusCode == 401 || out.StatusCode == 407 || strings.Contains(string(got), "authentication_error") {
			t.Errorf("Bedrock's %d = %d %s, want no authentication refusal", status, out.StatusCode, got)
		}
	}
}

// TestModelID_NewerModelsAndProfile: the undated names from Claude 4.6
// on map in both clouds; a profile prefixes the built-in Bedrock ids
// (and only those), and count_tokens' bare id is the unprefixed one.
func TestModelID_NewerModelsAndProfile(t *testing.T) {
	b := &Credential{Kind: KindBedrock}
	p := &Credential{Kind: KindBedrock, Profile: "us", Models: map[string]string{"claude-mine": "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x"}}
	v := &Credential{Kind: KindVertex, Profile: "us"}
	tests := []struct {
		c          *Credential
		model      string
		want, bare string
		wantOK     bool
	}{
		{b, "claude-opus-4-6", "anthropic.claude-opus-4-6-v1", "anthropic.claude-opus-4-6-v1", true},
		{b, "claude-sonnet-4-6", "anthropic.claude-sonnet-4-6", "anthropic.claude-sonnet-4-6", true},
		{b, "claude-opus-4-7", "anthropic.claude-opus-4-7", "anthropic.claude-opus-4-7", true},
		{b, "claude-mythos-5-1", "anthropic.claude-mythos-5-1", "anthropic.claude-mythos-5-1", true},
		{v, "claude-opus-4-6", "claude-opus-4-6", "claude-opus-4-6", true},
		{v, "claude-haiku-5-5", "claude-haiku-5-5", "claude-haiku-5-5", true},
		{v, "claude-sonnet-4-5", "claude-sonnet-4-5@20250929", "claude-sonnet-4-5@20250929", true},
		{p, "claude-opus-4-6", "us.anthropic.claude-opus-4-6-v1", "anthropic.claude-opus-4-6-v1", true},
		{p, "claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{p, "anthropic.claude-opus-5", "us.anthropic.claude-opus-5", "anthropic.claude-opus-5", true},
		{p, "us.anthropic.claude-opus-5", "us.anthropic.claude-opus-5", "anthropic.claude-opus-5", true},
		{p, "eu.anthropic.claude-opus-5", "", "", false},
		{p, "claude-mine", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x", true},
		{b, "claude-opus-9", "", "", false},
	}
	for _, tt := range tests {
		got, bare, ok := tt.c.modelID(tt.model)
		if got != tt.want || bare != tt.bare || ok != tt.wantOK {
			t.Errorf("modelID(%s/%s, %q) = %q, %q, %v, want %q, %q, %v", tt.c.Kind, tt.c.Profile, tt.model, got, bare, ok, tt.want, tt.bare, tt.wantOK)
		}
	}
}

// TestModels_CoverThePriceFile holds the table to the price file: every
// undated model name it prices, from Claude 4.6 on, maps in both clouds,
// so a price entry added without its cloud ids fails here.
func TestModels_CoverThePriceFile(t *testing.T) {
	raw, err := os.ReadFile("../spend/prices.json")
	if err != nil {
		t.Fatal(err)
	}
	var prices map[string]json.RawMessage
	if err := json.Unmarshal(raw, &prices); err != nil {
		t.Fatal(err)
	}
	undatedRE := regexp.MustCompile(`^claude-[a-z]+-([0-9]+)(?:-([0-9]))?$`)
	n := 0
	for name := range prices {
		m := undatedRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major < 4 || major == 4 && minor < 6 {
			continue
		}
		n++
		for _, kind := range []string{KindBedrock, KindVertex} {
			if _, ok := (&Credential{Kind: kind}).ModelID(name); !ok {
				t.Errorf("the price file prices %s, which the %s table does not map", name, kind)
			}
		}
	}
	if n < 13 {
		t.Errorf("found %d undated names from Claude 4.6 on in the price file, want at least 13", n)
	}
}

func TestAllowedBetas(t *testing.T) {
	box := []string{"claude-code-20250219", "interleaved-thinking-2025-05-14", "oauth-2025-04-20", "context-1m-2025-08-07"}
	tests := []struct {
		c    *Credential
		want string
	}{
		{&Credential{Kind: KindBedrock}, "interleaved-thinking-2025-05-14,context-1m-2025-08-07"},
		{&Credential{Kind: KindBedrock, Betas: []string{"oauth-2025-04-20"}}, "oauth-2025-04-20"},
		{&Credential{Kind: KindBedrock, Betas: []string{"*"}}, strings.Join(box, ",")},
		{&Credential{Kind: KindBedrock, Betas: []string{}}, ""},
		{&Credential{Kind: KindVertex}, strings.Join(box, ",")},
		{&Credential{Kind: KindVertex, Betas: []string{"context-1m-2025-08-07"}}, "context-1m-2025-08-07"},
	}
	for _, tt := range tests {
		if got := strings.Join(tt.c.allowedBetas(box), ","); got != tt.want {
			t.Errorf("allowedBetas(%s, betas %q) = %q, want %q", tt.c.Kind, tt.c.Betas, got, tt.want)
		}
	}
	// "betas": [] survives sealing as a list (no betas), not as none given.
	sealed, err := Check(KindBedrock, []byte(bedrockJSON(`,"betas":[]`)))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := Parse(sealed)
	if c.Betas == nil || len(c.allowedBetas(box)) != 0 {
		t.Errorf(`"betas": [] sealed as %s, which lets %q through`, sealed, c.allowedBetas(box))
	}
}

func TestAsked(t *testing.T) {
	many := make([]string, 40)
	for i := range many {
		many[i] = fmt.Sprintf("b-%d", i%20)
	}
	tests := []struct {
		header, body []string
		want         string
	}{
		{nil, nil, ""},
		{[]string{"a, b", "c,a"}, []string{"b", " d "}, "a,b,c,d"},
		{nil, []string{"x", "x"}, "x"},
		{[]string{strings.Join(many, ",")}, many, strings.Join(many[:20], ",")},
		// The 17th, which begins the map of those seen, repeats one of
		// the first 16: it is kept once.
		{[]string{strings.Join(many[:16], ",")}, []string{"b-0", "b-16", "b-1"}, strings.Join(many[:17], ",")},
	}
	for _, tt := range tests {
		if got := strings.Join(Asked(tt.header, tt.body), ","); got != tt.want {
			t.Errorf("Asked(%q, %q) = %q, want %q", tt.header, tt.body, got, tt.want)
		}
	}
}

func TestBetaRefused(t *testing.T) {
	sent := []string{"x-1", "context-1m-2025-08-07"}
	body := `{"anthropic_beta":["x-1","context-1m-2025-08-07"],"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		status int
		answer string
		body   string // the body sent; "" is body
		want   bool
	}{
		{400, `{"message":"The model returned the following errors: invalid beta flag"}`, "", true},
		{400, `{"Message":"Invalid Beta Flag"}`, "", true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"invalid beta flag"}}`, "", true},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"Unexpected value(s) ` + "`x-1`" + ` for the ` + "`anthropic-beta`" + ` header."}}`, "", true},
		{400, `[{"error":{"code":400,"message":"anthropic_beta: unsupported value context-1m-2025-08-07","status":"INVALID_ARGUMENT"}}]`, "", true},
		// No value sent is named, or only within a longer word.
		{400, `[{"error":{"code":400,"message":"anthropic_beta: unsupported value","status":"INVALID_ARGUMENT"}}]`, "", false},
		{400, `{"error":{"message":"Unexpected value(s) ` + "`x-12`" + ` for the ` + "`anthropic-beta`" + ` header."}}`, "", false},
		{400, `{"message":"messages: invalid role"}`, "", false},
		{400, `{"message":"anthropic_beta was fine; max_tokens too large"}`, "", false},
		// Bedrock's schema error repeating a member's name the box chose.
		{400, `{"message":"Malformed input request: #: extraneous key [anthropic_beta_invalid] is not permitted, please reformat your input and try again."}`,
			`{"anthropic_beta":["x-1"],"anthropic_beta_invalid":1}`, false},
		{400, `{"message":"Malformed input request: #: extraneous key [x-1 anthropic_beta invalid] is not permitted"}`,
			`{"anthropic_beta":["x-1"],"x-1 anthropic_beta invalid":1}`, false},
		{400, `{"message":"The model returned the following errors: invalid beta flag"}`,
			`{"anthropic_beta":["x-1"],"tools":[{"input_schema":{"properties":{"Invalid Beta Flag":{}}}}]}`, false},
		{403, `{"message":"invalid beta flag"}`, "", false},
		{400, `invalid beta flag`, "", false},
	}
	for _, tt := range tests {
		b := tt.body
		if b == "" {
			b = body
		}
		if got := betaRefused(tt.status, []byte(tt.answer), sent, []byte(b)); got != tt.want {
			t.Errorf("betaRefused(%d, %s, body %s) = %v, want %v", tt.status, tt.answer, b, got, tt.want)
		}
	}
	if betaRefused(400, []byte(`{"message":"invalid beta flag"}`), nil, []byte(body)) {
		t.Errorf("betaRefused with no beta sent = true, want false")
	}
}

func TestSTSRefusal(t *testing.T) {
	withStatus := func(status int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: errors.New("x")}
	}
	tests := []struct {
		code   string
		err    error
		status int
		typ    string
	}{
		{"AccessDenied", withStatus(403), 403, protocol.TypePermission},
		{"InvalidClientTokenId", withStatus(403), 403, protocol.TypePermission},
		{"ExpiredToken", withStatus(400), 403, protocol.TypePermission},
		{"RegionDisabledException", withStatus(403), 403, protocol.TypePermission},
		{"Throttling", withStatus(400), 429, protocol.TypeRateLimit},
		{"InternalFailure", withStatus(500), 500, protocol.TypeAPI},
		{"<script>", withStatus(403), 403, protocol.TypePermission},
	}
	for _, tt := range tests {
		resp, _ := failed(stsRefusal(tt.code, tt.err))
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tt.status || !strings.Contains(string(b), `"`+tt.typ+`"`) || strings.Contains(string(b), "<script>") {
			t.Errorf("stsRefusal(%s) = %d %s, want %d %s", tt.code, resp.StatusCode, b, tt.status, tt.typ)
		}
	}
}

// roundTrip is an http.RoundTripper made of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// An Anthropic error event inside a cloud's 200 stream (Vertex AI's
// passed as it comes, a chunk of Bedrock's) saying authentication_error
// reaches the box as a permission_error, as the cloud's error answers
// do: a box takes authentication_error as its own token refused, where
// the cloud refused the broker's credential. On the code before, both
// passed as they came.
func TestCloudStreams_NeverAnAuthenticationError(t *testing.T) {
	const authn = `{"type":"error","error":{"type":"authentication_error","message":"invalid credentials"}}`
	tests := []struct {
		name string
		read func(t *testing.T) []byte
	}{
		{"bedrock chunk", func(t *testing.T) []byte {
			var buf bytes.Buffer
			var hs eventstream.Headers
			hs.Set(":message-type", eventstream.StringValue("event"))
			hs.Set(":event-type", eventstream.StringValue("chunk"))
			payload, _ := json.Marshal(map[string][]byte{"bytes": []byte(authn)})
			_ = eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: hs, Payload: payload})
			got, err := io.ReadAll(newEventReader(io.NopCloser(&buf), nil))
			if err != nil {
				t.Fatal(err)
			}
			return got
		}},
		{"vertex stream", func(t *testing.T) []byte {
			key, _ := json.Marshal(vertexKey(t))
			sealed, err := Check(KindVertex, []byte(`{"region":"us-east5","service_account":`+string(key)+`}`))
			if err != nil {
				t.Fatal(err)
			}
			c, _ := Parse(sealed)
			cl := &Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				if r.URL.Host == "oauth2.googleapis.com" {
					return answer(http.StatusOK, "application/json", io.NopCloser(strings.NewReader(`{"access_token":"ya29.x","token_type":"Bearer","expires_in":3600}`))), nil
				}
				return answer(http.StatusOK, "text/event-stream", io.NopCloser(strings.NewReader(
					"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: error\ndata: "+authn+"\n\n"))), nil
			})}
			resp, err := cl.Do(t.Context(), c, Call{Method: "POST", Path: PathMessages, Body: []byte(`{"model":"claude-sonnet-4-5","stream":true,"max_tokens":5,"messages":[]}`)}, func(string) {})
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(got), "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n") {
				t.Errorf("read %q, want the stream's other events as they came", got)
			}
			return got
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(tt.read(t))
			if strings.Contains(got, protocol.TypeAuthn) || !strings.Contains(got, `"permission_error"`) || !strings.Contains(got, "invalid credentials") {
				t.Errorf("read %q, want the error event as a permission_error, its message kept", got)
			}
		})
	}
}
