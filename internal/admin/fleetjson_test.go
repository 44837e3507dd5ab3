package admin_test

import (
	"encoding/json"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
)

// TestFleetSpend_JSON pins the names GET /api/spend writes the fleet's
// counts with, in order, in each of its lines.
func TestFleetSpend_JSON(t *testing.T) {
	var c admin.SpendCounts
	c.Calls, c.Unpriced, c.Unmeasured, c.InputTokens, c.OutputTokens, c.CacheWriteTokens, c.CacheReadTokens, c.MeasuredUSD = 5, 1, 2, 10, 20, 30, 40, 1.5
	const counts = `"calls":5,"unpriced":1,"unmeasured":2,"inputTokens":10,"outputTokens":20,"cacheWriteTokens":30,"cacheReadTokens":40,"measuredUsd":1.5`
	ann, model := "github:ann", "claude-opus-5-5"
	var f admin.FleetSpend
	f.Month, f.SpendCounts, f.ChargedUSD = "2026-12", c, 2.25
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"counts", c, `{` + counts + `}`},
		{"payer", admin.PayerSpend{Payer: "visitor", Principal: &ann, SpendCounts: c}, `{"payer":"visitor","principal":"github:ann",` + counts + `}`},
		{"principal", admin.PrincipalSpend{SpendCounts: c, ChargedUSD: 2.25}, `{"principal":null,` + counts + `,"chargedUsd":2.25}`},
		{"model", admin.ModelSpend{Model: model, Priced: true, SpendCounts: c}, `{"model":"claude-opus-5-5","priced":true,` + counts + `}`},
		{"box", admin.BoxSpend{Box: "alpha", SpendCounts: c, ChargedUSD: 2.25}, `{"box":"alpha",` + counts + `,"chargedUsd":2.25}`},
		{"usage", admin.FleetUsage{Box: "alpha", Payer: "shared", Model: &model, SpendCounts: c},
			`{"box":"alpha","payer":"shared","principal":null,"model":"claude-opus-5-5",` + counts + `}`},
		{"total", f, `{"month":"2026-12",` + counts + `,"chargedUsd":2.25,"byPayer":null,"byPrincipal":null,"byModel":null,"byBox":null,` +
			`"usage":null,"cache":{"since":"","month":{"calls":0,"inputTokens":0,"cacheWriteTokens":0,"cacheReadTokens":0,"hitRatio":null},` +
			`"last24h":{"calls":0,"inputTokens":0,"cacheWriteTokens":0,"cacheReadTokens":0,"hitRatio":null},"byEntry":null}}`},
	}
	for _, tt := range tests {
		if got, err := json.Marshal(tt.v); err != nil || string(got) != tt.want {
			t.Errorf("json.Marshal(%s) = %s, %v, want %s", tt.name, got, err, tt.want)
		}
	}
}
