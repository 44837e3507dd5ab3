package egress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/intentius/boxbroker/internal/mint"
)

const (
	awsKeyID   = "AKIAIOSFODNN7EXAMPLE"
	awsSecret  = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	awsSession = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
)

// awsStandIn verifies a request's SigV4 signature by signing it again
// with the same library, from the headers it names as signed, and
// echoes the Authorization and session token it received.
func awsStandIn(service string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo-Authorization", auth)
		w.Header().Set("X-Echo-Session", r.Header.Get("X-Amz-Security-Token"))
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		hash := r.Header.Get("X-Amz-Content-Sha256")
		sum := sha256.Sum256(body)
		if hash != mint.UnsignedPayload && hash != hex.EncodeToString(sum[:]) {
			http.Error(w, "payload hash mismatch", http.StatusForbidden)
			return
		}
		_, signed, _ := strings.Cut(auth, "SignedHeaders=")
		signed, _, _ = strings.Cut(signed, ",")
		again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
		again.Host = r.Host
		again.ContentLength = r.ContentLength
		for _, h := range strings.Split(signed, ";") {
			if h != "host" && h != "content-length" {
				again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		if err != nil {
			http.Error(w, "no date", http.StatusForbidden)
			return
		}
		creds := aws.Credentials{AccessKeyID: awsKeyID, SecretAccessKey: awsSecret, SessionToken: awsSession}
		_ = v4.NewSigner().SignHTTP(r.Context(), creds, again, hash, service, "eu-west-1", at, func(o *v4.SignerOptions) {
			o.DisableURIPathEscaping = service == "s3"
		})
		if got := again.Header.Get("Authorization"); got != auth || auth == "" {
			http.Error(w, fmt.Sprintf("signature mismatch: got %s", auth), http.StatusForbidden)
			return
		}
		fmt.Fprintf(w, "ok %d bytes, signed %s, session %s", len(body), auth, r.Header.Get("X-Amz-Security-Token"))
	}
}

// boxSigned is the request a box's AWS SDK makes with its endpoint at
// the broker and its token as the access key: signed with a secret key
// the box makes up.
func boxSigned(t *testing.T, e *mintEnv, method, path string, body io.Reader, length int64, service string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, e.br.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	hash := mint.UnsignedPayload
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds := aws.Credentials{AccessKeyID: e.token, SecretAccessKey: "the-box-knows-no-secret"}
	if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hash, service, "eu-west-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

func (e *mintEnv) send(t *testing.T, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := e.br.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestMint_SigV4(t *testing.T) {
	e := newMintEnvHost(t, http.NotFound, awsStandIn("s3"))
	e.set(t, "S3", mint.KindSigV4, map[string]any{
		"access_key_id": awsKeyID, "secret_access_key": awsSecret, "session_token": awsSession, "region": "eu-west-1", "service": "s3",
	})
	e.set(t, "SQS", mint.KindSigV4, map[string]any{
		"access_key_id": awsKeyID, "secret_access_key": awsSecret, "region": "eu-west-1", "service": "sqs",
	})
	check := func(t *testing.T, body string, h http.Header) {
		t.Helper()
		all := body + fmt.Sprint(h)
		for _, v := range []string{awsSecret, awsSession, "Signature="} {
			if strings.Contains(all, v) {
				t.Errorf("the box's answer holds %q: %s", v, all)
			}
		}
	}
	tests := []struct {
		name       string
		secret     string
		body       func() (io.Reader, int64)
		wantStatus int
	}{
		{"small body, signed over its hash", "S3", func() (io.Reader, int64) { return strings.NewReader("hello, bucket"), 13 }, http.StatusOK},
		{"no body", "S3", func() (io.Reader, int64) { return nil, 0 }, http.StatusOK},
		{"streamed body, s3 takes UNSIGNED-PAYLOAD", "S3", func() (io.Reader, int64) {
			return io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("x"), 2<<20))), -1
		}, http.StatusOK},
		{"streamed body, sqs signs every body", "SQS", func() (io.Reader, int64) {
			return io.MultiReader(strings.NewReader("Action=SendMessage")), -1
		}, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, n := tt.body()
			req := boxSigned(t, e, http.MethodPut, "/egress/"+tt.secret+"/bucket/some%20key.txt?x-id=PutObject", body, n, "s3")
			status, ans, h := e.send(t, req)
			if status != tt.wantStatus {
				t.Fatalf("%s = %d %s, want %d", tt.name, status, ans, tt.wantStatus)
			}
			check(t, ans, h)
		})
	}
	// The box's own X-Amz-Content-Sha256 of chunked signing is refused:
	// its chunk signatures are made with the box's token.
	req := boxSigned(t, e, http.MethodPut, "/egress/S3/bucket/k", strings.NewReader("x"), 1, "s3")
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	if status, ans, _ := e.send(t, req); status != http.StatusBadRequest {
		t.Errorf("chunk-signed body = %d %s, want 400", status, ans)
	}
	// A body that holds the token is not sent.
	req = boxSigned(t, e, http.MethodPost, "/egress/SQS/", strings.NewReader("key="+e.token), int64(4+len(e.token)), "sqs")
	if status, ans, _ := e.send(t, req); status != http.StatusBadRequest {
		t.Errorf("body with the token = %d %s, want 400", status, ans)
	}
}

const hmacKey = "whsec_0123456789abcdef0123456789"

// hmacChecker takes a request only with X-Signature: sha256=<hex HMAC of
// the canonical string> and a fresh X-Timestamp, and echoes the
// signature.
func hmacChecker(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ts := r.Header.Get("X-Timestamp")
	mac := hmac.New(sha256.New, []byte(hmacKey))
	mac.Write(mint.Canonical(r.Method, r.URL.RequestURI(), ts, body))
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	got := r.Header.Get("X-Signature")
	w.Header().Set("X-Echo-Signature", got)
	if !hmac.Equal([]byte(got), []byte(want)) || ts == "" {
		http.Error(w, "bad signature "+got, http.StatusUnauthorized)
		return
	}
	fmt.Fprintf(w, "ok, signed %s over %d bytes", got, len(body))
}

func TestMint_HMAC(t *testing.T) {
	e := newMintEnvHost(t, http.NotFound, hmacChecker)
	e.set(t, "HOOK", mint.KindHMAC, map[string]any{
		"key": hmacKey, "header": "X-Signature", "prefix": "sha256=", "sign": "canonical",
	})
	for _, body := range []string{"", `{"event":"push"}`} {
		// The box's own X-Signature and X-Timestamp are replaced.
		h := http.Header{"X-Signature": {"sha256=box-made"}, "X-Timestamp": {"1"}}
		resp := e.br.Do(http.MethodPost, "/egress/HOOK/hooks/1?x=1", e.token, []byte(body), h)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("signed call = %d %s, want 200", resp.StatusCode, resp.Body)
		}
		all := string(resp.Body) + fmt.Sprint(resp.Header)
		if !strings.Contains(all, "[redacted]") || strings.Contains(all, hmacKey) {
			t.Errorf("the box's answer = %s, want the signature as [redacted]", all)
		}
		for _, s := range e.host.Seen() {
			if strings.HasSuffix(s.Header.Get("X-Signature"), "box-made") {
				t.Errorf("the box's own signature reached the host")
			}
		}
	}
}
