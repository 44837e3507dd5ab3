package spend_test

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
)

// geoBody is a Messages request of claude-opus-4-6, with geo (a JSON
// member and a comma, or "") before its messages.
func geoBody(geo string) []byte {
	return []byte(`{"model":"claude-opus-4-6","max_tokens":1000,` + geo + `"messages":[{"role":"user","content":"hi"}]}`)
}

// callsWithin makes calls of body, one after another, each settled
// before the next, at a fresh broker whose box has a budget of limit,
// until one is refused; it returns how many were answered and what the
// box spent.
func callsWithin(t *testing.T, h http.Handler, limit int64, body []byte) (int, int64) {
	t.Helper()
	b, token := newBroker(t, brokertest.Options{Anthropic: h})
	setBudget(t, b.Server.Store, limit)
	month := spend.Month(time.Now())
	n := 0
	for ; n < 100; n++ {
		resp := post(b, token, body)
		settled(t, b.Server.Store, "salad", month)
		if resp.StatusCode != 200 {
			break
		}
	}
	return n, boxSpent(settled(t, b.Server.Store, "salad", month))
}

// TestBudget_USInferenceIsPricedAtItsMultiplier: a call asking for
// US-only inference ("inference_geo": "us") is billed by Anthropic at
// 1.1 times its model's token rates on Claude Opus 4.6 and later; the
// broker reserved and charged it at the standard rates, so a box that
// asked for it on every call spent a tenth past its budget. Its bound
// and its charge are both at the model's multiplier: a budget holds
// fewer such calls than standard ones, and each is charged 1.1 times.
func TestBudget_USInferenceIsPricedAtItsMultiplier(t *testing.T) {
	var calls atomic.Int64
	h := usageStandIn(&calls, 100, 0)
	std, us := geoBody(`"inference_geo":"global",`), geoBody(`"inference_geo":"us",`)
	b, _ := newBroker(t, brokertest.Options{Anthropic: h})
	m := b.Server.Meter
	e := estimateMessages(us, int64(len(us)), 64000)
	usBound := m.Bound(e)
	e.Geo = "global"
	stdBound := m.Bound(e)
	if want := stdBound * 11 / 10; usBound < want {
		t.Errorf("Bound of a US-only call = %d, want at least %d (1.1 times the standard %d)", usBound, want, stdBound)
	}
	if e := estimateMessages(std, int64(len(std)), 64000); e.Geo != "global" {
		t.Errorf("Geo of %s = %q, want global", std, e.Geo)
	}
	price, _ := m.Prices().Lookup("claude-opus-4-6")
	stdCost := price.Cost(spend.Tokens{Input: 100, Output: 1000})
	limit := 10 * stdCost
	nStd, spentStd := callsWithin(t, h, limit, std)
	nUS, spentUS := callsWithin(t, h, limit, us)
	if nUS >= nStd {
		t.Errorf("a budget of %d held %d US-only calls and %d standard ones, want fewer US-only", limit, nUS, nStd)
	}
	if want := int64(nStd) * stdCost; spentStd != want {
		t.Errorf("%d standard calls spent %d, want %d", nStd, spentStd, want)
	}
	usCost := (stdCost*11 + 9) / 10
	if want := int64(nUS) * usCost; spentUS != want {
		t.Errorf("%d US-only calls spent %d, want %d (each 1.1 times %d)", nUS, spentUS, want, stdCost)
	}
	if spentUS > limit || spentStd > limit {
		t.Errorf("spent %d (US-only) and %d (standard), past the budget %d", spentUS, spentStd, limit)
	}
}

// TestBudget_WorkspaceDefaultGeoIsReservedAtItsMultiplier: a call that
// names no inference_geo runs in its workspace's default geography,
// which may be the US: its answer's usage says "us" and it is charged at
// 1.1 times the model's rates. Reserved at the standard rates, a call
// whose bound just fit the budget was charged past it. A call that names
// no geography, or names it null (or in another case than the API
// reads), is reserved at the model's multiplier; one that names "global"
// at the standard rates; each is charged as its usage says.
func TestBudget_WorkspaceDefaultGeoIsReservedAtItsMultiplier(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[],"stop_reason":"end_turn","usage":{"input_tokens":10,"cache_creation_input_tokens":1000,"cache_creation":{"ephemeral_1h_input_tokens":1000},"output_tokens":1000,"inference_geo":"us"}}`)
	})
	b, _ := newBroker(t, brokertest.Options{Anthropic: h})
	m := b.Server.Meter
	bound := func(body []byte) int64 { return m.Bound(estimateMessages(body, int64(len(body)), 64000)) }
	for _, geo := range []string{``, `"inference_geo":null,`, `"Inference_Geo":"global",`, `"inference_geo":"global","inference_geo":null,`} {
		e := estimateMessages(geoBody(geo), int64(len(geoBody(geo))), 64000)
		got := m.Bound(e)
		e.Geo = "global"
		if std := m.Bound(e); got < std*11/10 {
			t.Errorf("Bound of %s = %d, want at least %d (1.1 times the standard %d)", geoBody(geo), got, std*11/10, std)
		}
	}
	noGeo := estimateMessages(geoBody(""), int64(len(geoBody(""))), 64000)
	noGeo.Geo = "global"
	std := m.Bound(noGeo)
	// A budget of the standard bound of a call that names no geography,
	// whose input (its 1-hour cache writes) and output are within that
	// bound: the call is refused, or charged within it.
	n, spent := callsWithin(t, h, std, geoBody(""))
	if spent > std {
		t.Errorf("%d call(s) naming no geography, answered from the US, spent %d, past the budget %d", n, spent, std)
	}
	// A budget of its bound at the multiplier: one call, charged 1.1 times.
	price, _ := m.Prices().Lookup("claude-opus-4-6")
	cost := price.Cost(spend.Tokens{Input: 10, CacheWrite: 1000, CacheWrite1h: 1000, Output: 1000, Geo: "us"})
	limit := bound(geoBody(""))
	if n, spent := callsWithin(t, h, limit, geoBody("")); n != 1 || spent != cost || spent > limit {
		t.Errorf("a budget of %d served %d call(s) naming no geography and spent %d, want 1 and %d", limit, n, spent, cost)
	}
}

// TestSpend_AnswersUSInferenceIsCharged: an answer whose usage says its
// inference ran in the US (a workspace's default geography, with no
// inference_geo in the request) is charged at the multiplier too.
func TestSpend_AnswersUSInferenceIsCharged(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-6","content":[],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":1000,"inference_geo":"us"}}`)
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: h})
	if resp := post(b, token, geoBody("")); resp.StatusCode != 200 {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	month := spend.Month(time.Now())
	us := brokertest.Usage(t, b.Server.Store, "salad", month, 1)
	price, _ := b.Server.Meter.Prices().Lookup("claude-opus-4-6")
	want := price.Cost(spend.Tokens{Input: 100, Output: 1000, Geo: "us"})
	if std := price.Cost(spend.Tokens{Input: 100, Output: 1000}); want != (std*11+9)/10 {
		t.Errorf("Cost in the US = %d, want 1.1 times %d", want, std)
	}
	if len(us) != 1 || us[0].Cost != want {
		t.Errorf("usage = %+v, want a cost of %d", us, want)
	}
}

// TestPrices_GeoUS: a price file's inference_geo_us is the multiplier of
// US-only inference; omitted, the built-in one's of the same ID, or 1.1
// for a model the built-in table does not have; under 1 is refused.
func TestPrices_GeoUS(t *testing.T) {
	p, err := spend.ParsePrices([]byte(`{"claude-opus-4-6":{"input":5,"output":25},"claude-haiku-4-5":{"input":1,"output":5},"claude-opus-9":{"input":5,"output":25},"claude-sonnet-9":{"input":3,"output":15,"inference_geo_us":1.25}}`))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]float64{"claude-opus-4-6": 1.1, "claude-haiku-4-5": 1, "claude-opus-9": 1.1, "claude-sonnet-9": 1.25, "claude-opus-4-5": 1} {
		if pr, _ := p.Get(id); pr.GeoUS != want {
			t.Errorf("%s: GeoUS = %v, want %v", id, pr.GeoUS, want)
		}
	}
	if _, err := spend.ParsePrices([]byte(`{"claude-opus-9":{"input":5,"output":25,"inference_geo_us":0.5}}`)); err == nil {
		t.Error("inference_geo_us 0.5 was taken, want it refused")
	}
	again, err := spend.ParsePrices(mustFile(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if pr, _ := again.Get("claude-sonnet-9"); pr.GeoUS != 1.25 {
		t.Errorf("the table's File read back: GeoUS = %v, want 1.25", pr.GeoUS)
	}
}

func mustFile(t *testing.T, p *spend.Prices) []byte {
	t.Helper()
	b, err := p.File()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
