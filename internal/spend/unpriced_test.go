package spend_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// unpricedCalls is boxbroker_unpriced_calls_total by its labels
// model/priced_as/match.
func unpricedCalls(t *testing.T, b *brokertest.Broker) map[string]float64 {
	t.Helper()
	mfs, err := b.Server.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "boxbroker_unpriced_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got[l["model"]+"/"+l["priced_as"]+"/"+l["match"]] = m.GetCounter().GetValue()
		}
	}
	return got
}

// TestSpend_UnpricedModelIsWarnedOnceAndCounted: a model the table does
// not name is a WARN line naming it once per process however many calls
// use it, a count in boxbroker_unpriced_calls_total, and an entry of
// Meter.Unpriced (what the owner's page marks); a model of a family the
// table has is said to be priced by its family.
func TestSpend_UnpricedModelIsWarnedOnceAndCounted(t *testing.T) {
	logs := &brokertest.Buffer{}
	b, token := newBroker(t, brokertest.Options{Logs: logs})
	for _, model := range []string{"claude-mystery-9", "claude-mystery-9", "claude-mystery-9", "claude-opus-9", "claude-sonnet-4-5"} {
		if resp := post(b, token, messagesBody(model, 100, false)); resp.StatusCode != 200 {
			t.Fatalf("POST %s = %d %s", model, resp.StatusCode, resp.Body)
		}
	}
	month := spend.Month(time.Now())
	brokertest.Usage(t, b.Server.Store, "salad", month, 5)
	settled(t, b.Server.Store, "salad", month)
	var warns []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "price table") {
			warns = append(warns, line)
		}
	}
	if len(warns) != 2 || !strings.Contains(warns[0]+warns[1], `"model":"claude-mystery-9"`) || !strings.Contains(warns[0]+warns[1], `"model":"claude-opus-9"`) {
		t.Fatalf("WARN lines = %q, want one for claude-mystery-9 and one for claude-opus-9", warns)
	}
	for _, w := range warns {
		if strings.Contains(w, "claude-opus-9") && (!strings.Contains(w, "family") || !strings.Contains(w, `"priced_as":"claude-opus-5-5"`)) {
			t.Errorf("WARN for claude-opus-9 = %s, want it priced as its family's newest, claude-opus-5-5", w)
		}
	}
	got := unpricedCalls(t, b)
	want := map[string]float64{"claude-mystery-9/claude-opus-4-1/unpriced": 3, "claude-opus-9/claude-opus-5-5/family": 1}
	if len(got) != len(want) || got["claude-mystery-9/claude-opus-4-1/unpriced"] != 3 || got["claude-opus-9/claude-opus-5-5/family"] != 1 {
		t.Errorf("boxbroker_unpriced_calls_total = %v, want %v", got, want)
	}
	list := b.Server.Meter.Unpriced()
	if len(list) != 2 || list[0].Model != "claude-mystery-9" || list[0].Calls != 3 || list[0].Match != spend.Unpriced ||
		list[1].Model != "claude-opus-9" || list[1].As != "claude-opus-5-5" || list[1].Match != spend.Family {
		t.Errorf("Meter.Unpriced() = %+v, want claude-mystery-9 (3 calls, unpriced) and claude-opus-9 (family, as claude-opus-5-5)", list)
	}
}

// TestBudget_ClaudeCodeDefaultModelFitsAFiveDollarBudget: the issue's
// case. Claude Code's default model, one "hi" at a time, is charged
// cents, not $10 a call, so a $5 budget lets every call through; a model
// of a newer opus than the table knows is charged as the newest opus.
func TestBudget_ClaudeCodeDefaultModelFitsAFiveDollarBudget(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{})
	if err := b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "salad", Limit: 5_000_000, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	models := []string{"claude-opus-5-5", "claude-opus-5-5-20261101", "claude-opus-7"}
	for range 3 {
		for _, model := range models {
			if resp := post(b, token, messagesBody(model, 32000, true)); resp.StatusCode != 200 {
				t.Fatalf("POST %s = %d %s, want 200 under a $5 budget", model, resp.StatusCode, resp.Body)
			}
		}
	}
	month := spend.Month(time.Now())
	brokertest.Usage(t, b.Server.Store, "salad", month, 9)
	price, _ := b.Server.Meter.Prices().Lookup("claude-opus-5-5")
	want := 9 * price.Cost(spend.Tokens{Input: 12, Output: 6})
	if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent != want {
		t.Errorf("spent = %d micro-dollars, want %d: nine calls at claude-opus-5-5's price", spent, want)
	}
}

// TestSpend_UnpricedAsIsConfigurable: --unpriced-as names the model an
// unknown model is charged as; one not in the table stops the server.
func TestSpend_UnpricedAsIsConfigurable(t *testing.T) {
	b, token := newBroker(t, brokertest.Options{Config: func(c *server.Config) { c.UnpricedAs = "claude-haiku-4-5" }})
	if resp := post(b, token, messagesBody("gpt-9", 100, false)); resp.StatusCode != 200 {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	month := spend.Month(time.Now())
	brokertest.Usage(t, b.Server.Store, "salad", month, 1)
	price, _ := b.Server.Meter.Prices().Lookup("claude-haiku-4-5")
	if spent, want := boxSpent(settled(t, b.Server.Store, "salad", month)), price.Cost(spend.Tokens{Input: 12, Output: 6}); spent != want {
		t.Errorf("spent = %d, want %d at claude-haiku-4-5's price", spent, want)
	}
	cfg := server.Config{DataDir: t.TempDir(), UnpricedAs: "claude-nosuch"}
	if _, err := server.New(context.Background(), cfg, server.Options{}); err == nil || !strings.Contains(err.Error(), "--unpriced-as") || !strings.Contains(err.Error(), "claude-nosuch") {
		t.Errorf("server.New(--unpriced-as claude-nosuch) = %v, want an error naming the flag and the model", err)
	}
}
