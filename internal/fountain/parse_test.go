package fountain

import (
	"net/http"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		path     string
		ok       bool
		word, id string
	}{
		{"/fountain/api/conversations", true, WordConversations, ""},
		{"/fountain/api/conversations/", true, WordConversations, ""},
		{"/fountain/api/conversations/c1", true, WordConversations, "c1"},
		{"/fountain/api/conversations/c1/", true, WordConversations, "c1"},
		{"/fountain/api/conversations/c1/messages", true, WordConversations, "c1"},
		{"/fountain/api/sandboxes", true, WordSandboxes, ""},
		{"/fountain/api/sandboxes/s1", true, WordSandboxes, "s1"},
		{"/fountain/api/vaults/v1/secrets/API_KEY", true, WordVault, "v1"},
		{"/fountain/api/vault", false, "", ""},
		{"/fountain/api/conversationsx", false, "", ""},
		{"/fountain/api", false, "", ""},
		{"/fountain/api/", false, "", ""},
		{"/fountain", false, "", ""},
		{"/fountainx/api/conversations", false, "", ""},
		{"/fountain/api/sandboxes/..", false, "", ""},
		{"/fountain/api/sandboxes/s1/../s2", false, "", ""},
		{"/fountain/api/sandboxes/./s1", false, "", ""},
		{"/fountain/api/sandboxes//s1", false, "", ""},
		{"/fountain/api/sandboxes/s1//", false, "", ""},
		{"/fountain/api/sandboxes/s1\\..", false, "", ""},
		{"/fountain/api/sandboxes/s1\x00", false, "", ""},
		{"/fountain/api/sandboxes/s1\n", false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rt, ok := Parse(tt.path)
			if ok != tt.ok || (ok && (rt.Family.Word != tt.word || rt.ID != tt.id)) {
				t.Errorf("Parse(%q) = %q %q %v, want %q %q %v", tt.path, rt.Family.Word, rt.ID, ok, tt.word, tt.id, tt.ok)
			}
		})
	}
}

func TestStarts(t *testing.T) {
	tests := []struct {
		method, path string
		want         bool
	}{
		{http.MethodPost, "/fountain/api/conversations", true},
		{http.MethodPost, "/fountain/api/conversations/", false},
		{http.MethodGet, "/fountain/api/conversations", false},
		{http.MethodPost, "/fountain/api/conversations/c1", false},
	}
	for _, tt := range tests {
		rt, _ := Parse(tt.path)
		if got := starts(tt.method, rt); got != tt.want {
			t.Errorf("starts(%s, %q) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestConversationID(t *testing.T) {
	tests := []struct {
		body string
		id   string
		ok   bool
	}{
		{`{"id":"conv_1"}`, "conv_1", true},
		{`{"id":42,"x":[]}`, "42", true},
		{`{"conversation":{"id":"c"}}`, "", false},
		{`{"id":""}`, "", false},
		{`{"id":null}`, "", false},
		{`{"id":"a/b"}`, "", false},
		{`{"id":".."}`, "", false},
		{`{"id":{"v":1}}`, "", false},
		{`[{"id":"c"}]`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		id, ok := conversationID([]byte(tt.body))
		if id != tt.id || ok != tt.ok {
			t.Errorf("conversationID(%q) = %q %v, want %q %v", tt.body, id, ok, tt.id, tt.ok)
		}
	}
}

// TestIDKind: a name ending in a kind's word, then nothing, "s", "es",
// "id" or "ids" (in any case, "_" and "-" ignored), names that kind.
func TestIDKind(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"sandbox_id", "sandbox"},
		{"sandboxIds", "sandbox"},
		{"sandboxes", "sandbox"},
		{"Sandbox-ID", "sandbox"},
		{"conversation", "conversation"},
		{"parent_conversation_id", "conversation"},
		{"conversations", "conversation"},
		{"vaults", "vault"},
		{"vault_ids", "vault"},
		{"ſandbox_id", "sandbox"},
		{"conversationſ", "conversation"},
		{"VAULT_IDſ", "vault"},
		{"id", ""},
		{"sandboxed", ""},
		{"vaulting", ""},
		{"prompt", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := IDKind(tt.name); got != tt.want {
			t.Errorf("IDKind(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
