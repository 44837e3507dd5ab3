package proxy

import (
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/protocol"
)

// TestStripBoxHeaders_GrantNeverGoesUpstream covers every spelling a box
// might send the grant and its token in.
func TestStripBoxHeaders_GrantNeverGoesUpstream(t *testing.T) {
	h := http.Header{}
	h.Add("chant-grant", "bbg_one")
	h.Add("CHANT-GRANT", "bbg_two")
	h[protocol.HeaderGrant] = append(h[protocol.HeaderGrant], "bbg_three")
	h.Set("Authorization", "Bearer bbx_token")
	h.Set("X-Api-Key", "bbx_token")
	h.Set("Anthropic-Version", "2023-06-01")
	StripBoxHeaders(h)
	for _, k := range []string{protocol.HeaderGrant, "Authorization", "X-Api-Key"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("StripBoxHeaders left %s = %q", k, v)
		}
	}
	if h.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("StripBoxHeaders removed anthropic-version")
	}
}
