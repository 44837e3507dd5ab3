package egress_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestEgress_LineWrappedBase64OfTheValueIsRedacted is the attack on an
// answer search that finds a value's base64 only whole and contiguous:
// the box writes its token where the host keeps it (the broker writes
// the value there), and the host hands the file back as base64 with a
// line break every 60 characters (GitHub's contents API) or CRLF every
// 76 (MIME). The box joins the lines and decodes the value. With the
// file's lead shifted a byte at a time, the breaks fall at every place
// in the value's base64.
func TestEgress_LineWrappedBase64OfTheValueIsRedacted(t *testing.T) {
	for _, wrap := range []string{"github", "mime", "none"} {
		t.Run(wrap, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &brokertest.WrappingHost{}
			blob := newHost(t, h.ServeHTTP)
			value := "ghp_" + randomHex(18) // 40 bytes, as a GitHub token
			e.br.SetSecret("shop", "GH", blob.URL, value)
			e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "GH"))
			bearer := http.Header{"Authorization": {"Bearer " + e.token}}
			for lead := range 62 {
				store := http.Header{"Authorization": {"Bearer " + e.token}, "X-Note": {e.token}}
				if resp, body := e.do(t, http.MethodPost, "/egress/GH/blob?lead="+strings.Repeat("x", lead), store, nil); resp.StatusCode != http.StatusCreated {
					t.Fatalf("store = %d %s, want 201", resp.StatusCode, body)
				}
				resp, body := e.do(t, http.MethodGet, "/egress/GH/blob?wrap="+wrap, bearer, nil)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("read = %d %s, want 200", resp.StatusCode, body)
				}
				if got := brokertest.Unwrap(t, body, wrap); strings.Contains(got, value[2:len(value)-2]) {
					t.Fatalf("lead %d: the box decodes the value from the %s-wrapped answer %q", lead, wrap, body)
				}
				if !strings.Contains(string(body), "[redacted]") {
					t.Fatalf("lead %d: the answer = %q, want [redacted] in the value's base64", lead, body)
				}
			}
		})
	}
}

// TestEgress_ReplacedValueStoredAtHostIsRedacted is the attack on an
// answer search that reads only the secrets as they are set now: the box
// writes its token where the host keeps it (the broker writes the value
// V1 there), its owner sets the secret to V2, and the box reads the kept
// V1 back. What was written for the box is searched for a day after.
func TestEgress_ReplacedValueStoredAtHostIsRedacted(t *testing.T) {
	e := newEnv(t, nil)
	k := &keeper{keepHeader: "X-Note"}
	h := newHost(t, k.ServeHTTP)
	v1, v2 := "sk_first_"+randomHex(16), "sk_second_"+randomHex(16)
	e.br.SetSecret("shop", "API", h.URL, v1)
	e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "API"))
	if resp, body := e.do(t, http.MethodPost, "/egress/API/items", http.Header{"Authorization": {"Bearer " + e.token}, "X-Note": {e.token}}, strings.NewReader("x")); resp.StatusCode != http.StatusCreated {
		t.Fatalf("store = %d %s, want 201", resp.StatusCode, body)
	}
	e.br.SetSecret("shop", "API", h.URL, v2)
	resp, body := e.do(t, http.MethodGet, "/egress/API/items", http.Header{"Authorization": {"Bearer " + e.token}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read = %d %s, want 200", resp.StatusCode, body)
	}
	if all := string(body) + fmt.Sprint(resp.Header); strings.Contains(all, v1) || strings.Contains(all, v2) {
		t.Errorf("the answer carries the replaced value: %s", all)
	}
	if !strings.Contains(string(body), e.token) {
		t.Errorf("the answer = %s, want the box's token in the replaced value's place", body)
	}
}
