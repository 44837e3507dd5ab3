package mint

import (
	"strings"
	"testing"
)

// A token endpoint that echoes a value into its error code: the refusal
// kept for the owner (secret list, the owner's page) leaves it out.
func TestRefusedError_KeepsOnlyAPlainCode(t *testing.T) {
	for code, kept := range map[string]bool{
		"invalid_grant":               true,
		"":                            false,
		"rt_ECHOED-REFRESH-TOKEN":     false,
		"invalid grant":               false,
		strings.Repeat("a", 41):       false,
		"unauthorized_client":         true,
		"<script>alert(1)</script>":   false,
		"invalid_grant\nrt_ECHOED123": false,
	} {
		msg := (&RefusedError{Kind: KindOAuth2, Status: 400, Code: code}).Error()
		if got := code != "" && strings.Contains(msg, code); got != kept {
			t.Errorf("code %q: message %q keeps it = %v, want %v", code, msg, got, kept)
		}
	}
}
