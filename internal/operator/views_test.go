package operator_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// TestProposalView_JSON pins the admin API's proposal, byte for byte: its
// names (snake_case), their order, and which are left out when empty.
func TestProposalView_JSON(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	var rule store.Proposal
	rule.ID, rule.Box, rule.Kind, rule.Secret, rule.Method, rule.Path = "p-0123456789ab", "alpha", store.ProposalRule, "GITHUB", "POST", "/repos/acme/x/issues"
	rule.Host, rule.Reason, rule.Key, rule.Count, rule.State = "https://api.github.com", "outside its rules", "k", 2, store.ProposalApproved
	rule.CreatedAt, rule.UpdatedAt, rule.ExpiresAt = at, at.Add(time.Minute), at.Add(time.Hour)
	rule.Until, rule.DecidedBy, rule.DecidedAt = at.Add(2*time.Hour), "cli", at.Add(time.Hour)
	var budget store.Proposal
	budget.ID, budget.Box, budget.Kind, budget.Model, budget.Amount = "p-000000000001", "beta", store.ProposalBudget, "claude-opus-5-5", 250000
	budget.Reason, budget.Count, budget.State, budget.CreatedAt, budget.UpdatedAt, budget.ExpiresAt = "over budget", 1, store.ProposalPending, at, at, at.Add(time.Hour)
	tests := []struct {
		name string
		p    store.Proposal
		want string
	}{
		{"rule, approved", rule, `{"id":"p-0123456789ab","box":"alpha","kind":"rule","secret":"GITHUB","method":"POST","path":"/repos/acme/x/issues",` +
			`"host":"https://api.github.com","reason":"outside its rules","count":2,"state":"approved","created_at":"2026-12-06T12:00:00Z",` +
			`"updated_at":"2026-12-06T12:01:00Z","expires_at":"2026-12-06T13:00:00Z","until":"2026-12-06T14:00:00.000Z","decided_by":"cli",` +
			`"decided_at":"2026-12-06T13:00:00.000Z"}`},
		{"budget, pending", budget, `{"id":"p-000000000001","box":"beta","kind":"budget","model":"claude-opus-5-5","amount_micros":250000,` +
			`"reason":"over budget","count":1,"state":"pending","created_at":"2026-12-06T12:00:00Z","updated_at":"2026-12-06T12:00:00Z",` +
			`"expires_at":"2026-12-06T13:00:00Z","until":null,"decided_at":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(operator.ProposalViewOf(tt.p))
			if err != nil || string(got) != tt.want {
				t.Errorf("json.Marshal(ProposalViewOf(%s)) = %s, %v, want %s", tt.p.ID, got, err, tt.want)
			}
			// The admin API's client reads the same view back.
			var back operator.ProposalView
			err = json.Unmarshal(got, &back)
			if again, _ := json.Marshal(back); err != nil || string(again) != tt.want {
				t.Errorf("json.Unmarshal then Marshal = %s, %v, want %s", again, err, tt.want)
			}
		})
	}
}

// TestUsageView_JSON pins the names of a box's usage line in GET
// /api/boxes/{name}/spend, in order.
func TestUsageView_JSON(t *testing.T) {
	var u operator.UsageView
	model := "claude-opus-5-5"
	u.Payer, u.Model, u.Calls, u.Unpriced, u.Unmeasured = "shared", &model, 5, 1, 2
	u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens, u.CostUSD = 10, 20, 30, 40, 1.5
	want := `{"payer":"shared","principal":null,"model":"claude-opus-5-5","calls":5,"unpriced":1,"unmeasured":2,"inputTokens":10,` +
		`"outputTokens":20,"cacheWriteTokens":30,"cacheReadTokens":40,"costUsd":1.5}`
	if got, err := json.Marshal(u); err != nil || string(got) != want {
		t.Errorf("json.Marshal(UsageView) = %s, %v, want %s", got, err, want)
	}
}
