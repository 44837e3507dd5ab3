package egressproxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestProxy_LineWrappedBase64OfTheValueIsRedacted is the attack on a
// proxy whose answers are searched for a value's base64 only whole and
// contiguous: in a tunnel to the secret's host, the box writes its token
// where the host keeps it (the broker writes the value there), and reads
// the file back as GitHub's contents API answers it, base64 with a
// newline every 60 characters; it joins the lines and decodes the
// value. With the file's lead shifted a byte at a time, the breaks fall
// at every place in the value's base64.
func TestProxy_LineWrappedBase64OfTheValueIsRedacted(t *testing.T) {
	k := &brokertest.WrappingHost{}
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
		status, body := send(t, c, req)
		if status/100 != 2 {
			t.Fatalf("%s %s in the tunnel = %d %s, want 2xx", method, path, status, body)
		}
		return body
	}
	for lead := range 62 {
		call(http.MethodPost, "/owner/contents/.env?lead="+strings.Repeat("x", lead), true)
		kept := k.File()
		if !strings.Contains(kept, secretValue) {
			t.Fatalf("the host kept %q, want the secret's value", kept)
		}
		body := call(http.MethodGet, "/owner/contents/.env?wrap=github", false)
		dec := brokertest.Unwrap(t, body, "github")
		if strings.Contains(dec, secretValue[2:len(secretValue)-2]) {
			t.Fatalf("lead %d: the box decodes the value from the tunnel's answer %s", lead, body)
		}
		if !strings.Contains(string(body), "[redacted]") {
			t.Fatalf("lead %d: the answer = %s, want [redacted] in the value's base64", lead, body)
		}
	}
}
