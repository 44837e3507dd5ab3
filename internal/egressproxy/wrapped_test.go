package egressproxy_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// wrappingKeeper is a secret's host that keeps the header X-Note of each
// POST as a line of a file (a value written where a credential goes,
// kept as a request log keeps it), and answers GET as GitHub's contents
// API answers a file: JSON whose content is the file's base64 with a
// newline every 60 characters.
type wrappingKeeper struct {
	mu   sync.Mutex // guards file
	file string
}

func (k *wrappingKeeper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.Method == http.MethodPost {
		k.file = r.URL.Query().Get("lead") + "GITHUB_KEY=" + r.Header.Get("X-Note") + "\n"
		w.WriteHeader(http.StatusCreated)
		return
	}
	enc := base64.StdEncoding.EncodeToString([]byte(k.file))
	var wrapped strings.Builder
	for len(enc) > 60 {
		wrapped.WriteString(enc[:60] + "\n")
		enc = enc[60:]
	}
	wrapped.WriteString(enc)
	b, _ := json.Marshal(map[string]string{"encoding": "base64", "content": wrapped.String()})
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// TestProxy_LineWrappedBase64OfTheValueIsRedacted is the attack on a
// proxy whose answers are searched for a value's base64 only whole and
// contiguous: in a tunnel to the secret's host, the box writes its token
// where the host keeps it (the broker writes the value there), and reads
// the file back as GitHub's contents API answers it, base64 with a
// newline every 60 characters; it joins the lines and decodes the
// value. With the file's lead shifted a byte at a time, the breaks fall
// at every place in the value's base64.
func TestProxy_LineWrappedBase64OfTheValueIsRedacted(t *testing.T) {
	k := &wrappingKeeper{}
	f := newFixtureWith(t, k) // k serves /owner/ on the secret's host
	c := f.client(t, f.token, f.caPool, false)
	call := func(method, path string, note bool) []byte {
		t.Helper()
		req, err := http.NewRequest(method, "https://"+f.host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+f.token)
		if note {
			req.Header.Set("X-Note", f.token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s in the tunnel = %d %s, want 2xx", method, path, resp.StatusCode, body)
		}
		return body
	}
	for lead := range 62 {
		call(http.MethodPost, "/owner/contents/.env?lead="+strings.Repeat("x", lead), true)
		k.mu.Lock()
		kept := k.file
		k.mu.Unlock()
		if !strings.Contains(kept, secretValue) {
			t.Fatalf("the host kept %q, want the secret's value", kept)
		}
		body := call(http.MethodGet, "/owner/contents/.env", false)
		var v struct{ Content string }
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("the answer %s is not JSON: %v", body, err)
		}
		joined := strings.ReplaceAll(v.Content, "\n", "")
		var dec []byte
		for i := 0; i+4 <= len(joined); i += 4 { // what decodes, around a hole
			if b, err := base64.StdEncoding.DecodeString(joined[i : i+4]); err == nil {
				dec = append(dec, b...)
			}
		}
		if strings.Contains(string(dec), secretValue[2:len(secretValue)-2]) {
			t.Fatalf("lead %d: the box decodes the value from the tunnel's answer %s", lead, body)
		}
		if !strings.Contains(v.Content, "[redacted]") {
			t.Fatalf("lead %d: the answer = %s, want [redacted] in the value's base64", lead, body)
		}
	}
}
