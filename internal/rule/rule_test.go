package rule_test

import (
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/rule"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAdmission_Require: words the box's last report declares for the
// capability, brokered by this broker, are allowed; the first word it
// does not declare (no report, another broker's entry, a word the scope
// does not list) is the rule's 403, of reason declaration.
func TestAdmission_Require(t *testing.T) {
	report := &protocol.Declaration{Capabilities: []protocol.Capability{
		{Name: "inference", Broker: "lobby", Scope: []string{"agent"}},
		{Name: "egress", Broker: "elsewhere", Scope: []string{"GITHUB"}},
	}}
	tests := []struct {
		name       string
		report     *protocol.Declaration
		capability string
		words      []string
		refused    bool
	}{
		{"declared", report, "inference", []string{"agent"}, false},
		{"no words", report, "inference", nil, false},
		{"no report", nil, "inference", []string{"agent"}, true},
		{"another broker's entry", report, "egress", []string{"GITHUB"}, true},
		{"a word the scope does not list", report, "inference", []string{"agent", "decide"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := rule.Admit(store.Box{Name: "a"}, "lobby", tt.capability)
			a.Report = tt.report
			err := a.Require(tt.words)
			if (err != nil) != tt.refused {
				t.Fatalf("Require(%q) = %v, want refused %v", tt.words, err, tt.refused)
			}
			if err == nil {
				return
			}
			e, ok := err.(*capability.Error)
			if !ok || e.Status != http.StatusForbidden || e.Type != protocol.TypePermission || e.Reason != capability.ReasonDeclaration {
				t.Errorf("Require(%q) = %#v, want a 403 %s of reason %s", tt.words, err, protocol.TypePermission, capability.ReasonDeclaration)
			}
		})
	}
}
