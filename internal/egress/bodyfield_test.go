package egress_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/proxy"
)

// blobHost stands in for a host that keeps what a box writes (GitHub's
// Git Data API): POST /blobs keeps the request body whole as a blob, and
// GET /blobs/N answers it as GitHub does, base64 with a newline every 60
// characters.
type blobHost struct {
	*host
	mu    sync.Mutex // guards blobs
	blobs []string
}

func newBlobHost(t *testing.T) *blobHost {
	bh := &blobHost{}
	bh.host = newHost(t, func(w http.ResponseWriter, r *http.Request) {
		bh.mu.Lock()
		defer bh.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			bh.blobs = append(bh.blobs, string(b))
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"sha":"%d"}`, len(bh.blobs)-1)
			return
		}
		var n int
		if _, err := fmt.Sscanf(r.URL.Path, "/blobs/%d", &n); err != nil || n < 0 || n >= len(bh.blobs) {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"encoding": "base64", "content": brokertest.WrapEvery(base64.StdEncoding.EncodeToString([]byte(bh.blobs[n])), 60, "\n")})
	})
	return bh
}

// TestEgress_TokenInABlobNeverBecomesTheValue is the attack of issue 40
// item 1: the box writes its token into a blob at a secret's host (as
// plain text, inside a JSON string among other words, in a form field
// the secret does not name, in a multipart part), the host keeps it and
// answers it back as base64 wrapped every 60 characters, a form no
// answer search is sure to see through. The broker writes the value only
// where a credential goes, so the host keeps a marker of the token's
// length, never the value, and the box decodes no value from the answer.
func TestEgress_TokenInABlobNeverBecomesTheValue(t *testing.T) {
	e := newEnv(t, nil)
	bh := newBlobHost(t)
	e.declare(t, bh.URL, e.value, "BLOB")
	// The secret names a body field: one not named still gets no value.
	e.br.SetSecret("shop", "BLOB", bh.URL, e.value, "client_secret")

	var mp strings.Builder
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("client_secret", e.token)
	_ = mw.Close()
	tests := []struct {
		name, ctype, body string
	}{
		{"plain text", "text/plain", "GITHUB_KEY=" + e.token + "\n"},
		{"json string among other words", "application/json", `{"content":"my key is ` + e.token + ` ok","encoding":"utf-8"}`},
		{"json, the whole value of a field not named", "application/json", `{"content":"` + e.token + `"}`},
		{"form field not named", "application/x-www-form-urlencoded", "note=" + e.token},
		{"multipart part named as the field", mw.FormDataContentType(), mp.String()},
		{"octet stream", "application/octet-stream", e.token},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + e.token}, "Content-Type": {tt.ctype}}
			resp, body := e.do(t, http.MethodPost, "/egress/BLOB/blobs", h, strings.NewReader(tt.body))
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /blobs = %d %s, want 201", resp.StatusCode, body)
			}
			bh.mu.Lock()
			kept := bh.blobs[i]
			bh.mu.Unlock()
			if strings.Contains(kept, e.value) {
				t.Errorf("the host keeps the value in the blob: %q", kept)
			}
			if want := strings.ReplaceAll(tt.body, e.token, proxy.TokenMarker(len(e.token))); kept != want {
				t.Errorf("the host keeps %q, want %q (a marker of the token's length in its place)", kept, want)
			}
			resp, body = e.do(t, http.MethodGet, fmt.Sprintf("/egress/BLOB/blobs/%d", i), http.Header{"Authorization": {"Bearer " + e.token}}, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /blobs/%d = %d %s, want 200", i, resp.StatusCode, body)
			}
			var blob struct{ Content string }
			if err := json.Unmarshal(body, &blob); err != nil {
				t.Fatalf("GET /blobs/%d = %s: %v", i, body, err)
			}
			dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(blob.Content, "\n", ""))
			if err != nil {
				t.Fatalf("the blob's content does not decode: %v", err)
			}
			if strings.Contains(string(dec), e.value) {
				t.Errorf("the box decoded the value from the blob: %q", dec)
			}
		})
	}
}

// TestEgress_ValueOnlyInNamedBodyFields: the value is written in a body
// only in a top-level field of a form or JSON body that the secret names
// (--body-field), and only where that field's whole value is the box's
// token; everywhere else in a body the token becomes a marker of its own
// length, so a long body keeps its declared length.
func TestEgress_ValueOnlyInNamedBodyFields(t *testing.T) {
	e := newEnv(t, nil)
	value := "sk/live+" + randomHex(16) + `"=`
	bh := newBodyHost(t)
	e.declare(t, bh.URL, value, "BODY")
	e.br.SetSecret("shop", "BODY", bh.URL, value, "key", "client_secret")
	jsonValue, _ := json.Marshal(value)
	escaped := strings.Replace(e.token, "_", `\u005f`, 1)
	marker := proxy.TokenMarker(len(e.token))
	big := strings.Repeat("x", 2<<20)
	tests := []struct {
		name   string
		ctype  string
		body   string
		stream bool // sent with no length
		want   string
	}{
		{"form, named", "application/x-www-form-urlencoded", "amount=1&key=" + e.token, false, "amount=1&key=" + url.QueryEscape(value)},
		{"form, named, percent-escaped", "application/x-www-form-urlencoded", "key=%62bx" + e.token[3:], false, "key=" + url.QueryEscape(value)},
		{"form, named twice", "application/x-www-form-urlencoded", "client_secret=" + e.token + "&key=" + e.token, false, "client_secret=" + url.QueryEscape(value) + "&key=" + url.QueryEscape(value)},
		{"form, named, streamed", "application/x-www-form-urlencoded", "key=" + e.token, true, "key=" + url.QueryEscape(value)},
		{"form, not named", "application/x-www-form-urlencoded", "note=" + e.token, false, "note=" + marker},
		{"form, named, other words too", "application/x-www-form-urlencoded", "key=my+" + e.token, false, "key=my+" + marker},
		{"json, named", "application/json", `{"key":"` + e.token + `"}`, false, `{"key":` + string(jsonValue) + `}`},
		{"json, named, \\u escape", "application/json; charset=utf-8", `{"key":"` + escaped + `"}`, false, `{"key":` + string(jsonValue) + `}`},
		{"json, named, streamed", "application/json", `{"key": "` + e.token + `", "n": 1}`, true, `{"key": ` + string(jsonValue) + `, "n": 1}`},
		{"json, not named", "application/json", `{"note":"` + e.token + `"}`, false, `{"note":"` + marker + `"}`},
		{"json, named, among other words", "application/json", `{"key":"Bearer ` + e.token + `"}`, false, `{"key":"Bearer ` + marker + `"}`},
		{"json, named, nested", "application/json", `{"auth":{"key":"` + e.token + `"}}`, false, `{"auth":{"key":"` + marker + `"}}`},
		{"text, a field's name in it", "text/plain", "key=" + e.token, false, "key=" + marker},
		{"text over a MiB, streamed", "text/plain", big + e.token + big, true, big + marker + big},
		{"text over a MiB, its length declared", "text/plain", big + e.token + big, false, big + marker + big},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {tt.ctype}, "Authorization": {"Bearer " + e.token}}
			var body io.Reader = strings.NewReader(tt.body)
			if tt.stream {
				body = io.MultiReader(body)
			}
			before := len(bh.Seen())
			resp, got := e.do(t, http.MethodPost, "/egress/BODY/v1/charges", h, body)
			bh.mu.Lock()
			bodies := bh.bodies[before:]
			bh.mu.Unlock()
			if resp.StatusCode != http.StatusOK || len(bodies) != 1 {
				t.Fatalf("POST = %d %s (the host received %d bodies), want 200", resp.StatusCode, got, len(bodies))
			}
			sent := bodies[0]
			if strings.Contains(unescape(sent), e.token) {
				t.Errorf("the host received the box's token in the body")
			}
			if sent != tt.want {
				t.Errorf("the host received a body of %d bytes, want %d", len(sent), len(tt.want))
				if len(sent) < 200 {
					t.Errorf("the host received %q, want %q", sent, tt.want)
				}
			}
			if !tt.stream && !strings.Contains(string(got), fmt.Sprintf("length %d", len(tt.want))) {
				t.Errorf("the host answered %q, want the body's length declared as %d", got, len(tt.want))
			}
		})
	}
}

// TestEgress_TokenInANamedBodyFieldAloneIsServed: an app that sends its
// key only in a body field (an OAuth token call with client_secret_post,
// form-encoded, or a JSON API) works unchanged when the secret names the
// field: the broker finds the box's token there, though the head holds
// none, and the host receives the value in its place.
func TestEgress_TokenInANamedBodyFieldAloneIsServed(t *testing.T) {
	e := newEnv(t, nil)
	bh := newBodyHost(t)
	e.declare(t, bh.URL, e.value, "OAUTH")
	e.br.SetSecret("shop", "OAUTH", bh.URL, e.value, "client_secret")
	tests := []struct {
		name, ctype, body, want string
	}{
		{"form", "application/x-www-form-urlencoded", "grant_type=client_credentials&client_id=app&client_secret=" + e.token,
			"grant_type=client_credentials&client_id=app&client_secret=" + e.value},
		{"json", "application/json", `{"client_id":"app","client_secret":"` + e.token + `"}`, `{"client_id":"app","client_secret":"` + e.value + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(bh.Seen())
			resp, got := e.do(t, http.MethodPost, "/egress/OAUTH/token", http.Header{"Content-Type": {tt.ctype}}, strings.NewReader(tt.body))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST with the token in a named field alone = %d %s, want 200", resp.StatusCode, got)
			}
			bh.mu.Lock()
			bodies := bh.bodies[before:]
			bh.mu.Unlock()
			if len(bodies) != 1 || bodies[0] != tt.want {
				t.Errorf("the host received %q, want %q", bodies, tt.want)
			}
		})
	}
}

// TestEgress_UnauthenticatedBodyIsReadOnlyWhenSmall: a request whose
// head holds no token has its body read only when it is a form or JSON
// body of at most 64 KiB with its length declared; any other is refused
// at once, its body unread and unsent, as before the box is known on
// every route.
func TestEgress_UnauthenticatedBodyIsReadOnlyWhenSmall(t *testing.T) {
	e := newEnv(t, nil)
	addr := strings.TrimPrefix(e.br.URL, "http://")
	tests := []struct {
		name, head string
	}{
		{"form over 64 KiB", "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 65537\r\n"},
		{"json of no declared length", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"},
		{"text", "Content-Type: text/plain\r\nContent-Length: 100\r\n"},
		{"form, gzip", "Content-Type: application/x-www-form-urlencoded\r\nContent-Encoding: gzip\r\nContent-Length: 100\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// The head, and none of the body.
			fmt.Fprintf(conn, "POST /egress/ECHO/token HTTP/1.1\r\nHost: %s\r\n%s\r\n", addr, tt.head)
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer while the body is unsent: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST with no token and an unsent body = %d, want 401", resp.StatusCode)
			}
		})
	}
}
