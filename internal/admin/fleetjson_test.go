package admin_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
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

// TestSpend_BoxAndFleetCountAlike: a box's usage line (GET
// /api/boxes/{name}/spend) and the fleet's (GET /api/spend) read every
// count of the same usage from the store, through one UsageCountsOf.
func TestSpend_BoxAndFleetCountAlike(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	month := spend.Month(time.Now())
	u := store.Usage{Box: "alpha", Month: month, PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 7, Unpriced: 1, Unmeasured: 2,
		InputTokens: 300, OutputTokens: 90, CacheWriteTokens: 40, CacheReadTokens: 500, Cost: 1_500_000}
	if err := b.Server.Store.Settle(context.Background(), store.Settlement{Box: "alpha", Month: month, Charge: 1_500_000, Usage: []store.Usage{u}}); err != nil {
		t.Fatal(err)
	}
	want := operator.UsageCounts{Calls: 7, Unpriced: 1, Unmeasured: 2, InputTokens: 300, OutputTokens: 90, CacheWriteTokens: 40, CacheReadTokens: 500}
	var box operator.SpendReport
	decode(t, "GET /api/boxes/alpha/spend", b.Admin("GET", "/api/boxes/alpha/spend", b.AdminToken, nil), 200, &box)
	if len(box.Usage) != 1 || box.Usage[0].UsageCounts != want || box.Usage[0].CostUSD != 1.5 {
		t.Errorf("GET /api/boxes/alpha/spend usage = %+v, want one line of %+v costing $1.5", box.Usage, want)
	}
	var fleet admin.FleetSpend
	decode(t, "GET /api/spend", b.Admin("GET", "/api/spend", b.AdminToken, nil), 200, &fleet)
	if len(fleet.Usage) != 1 || fleet.Usage[0].UsageCounts != want || fleet.Usage[0].MeasuredUSD != 1.5 || fleet.UsageCounts != want {
		t.Errorf("GET /api/spend usage = %+v, total %+v, want one line of %+v measuring $1.5", fleet.Usage, fleet.SpendCounts, want)
	}
}
