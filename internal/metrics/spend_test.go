package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/metrics"
)

// TestMetrics_ModelLabelIsBounded counts calls of more models than
// MaxModels, of names that are no model ID (a box's token among them),
// and of a payer kind that is none: the model label takes at most
// MaxModels names and "other" (or "unknown"), the payer label only the
// payer kinds and "other", and no token reaches a label.
func TestMetrics_ModelLabelIsBounded(t *testing.T) {
	m := metrics.New()
	for i := 0; i < metrics.MaxModels+20; i++ {
		m.Usage(fmt.Sprintf("claude-model-%d", i), "shared", true, 1_000_000, 10, 5, 0, 0)
	}
	const tok = "bbx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	m.Usage(tok, "owner", true, 1000, 1, 1, 1, 1)
	m.Usage(strings.Repeat("a", 65), "visitor", true, 0, 1, 0, 0, 0)
	m.Usage("", "who-knows", false, 0, 1, 0, 0, 0)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	if strings.Contains(text, "bbx_") {
		t.Errorf("/metrics holds a box's token")
	}
	series := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "boxbroker_spend_usd_total{") {
			series++
		}
	}
	// MaxModels names and "other" for shared; "other" for owner and
	// visitor; "unknown" for the payer kind that is none.
	if want := metrics.MaxModels + 1 + 2 + 1; series != want {
		t.Errorf("boxbroker_spend_usd_total has %d series, want %d", series, want)
	}
	for _, want := range []string{
		`boxbroker_tokens_total{kind="input",model="other",payer="shared"} 200`,
		`boxbroker_tokens_total{kind="input",model="claude-model-0",payer="shared"} 10`,
		`boxbroker_tokens_total{kind="cache_write",model="other",payer="owner"} 1`,
		`boxbroker_spend_usd_total{model="claude-model-0",payer="shared"} 1`,
		`boxbroker_spend_usd_total{model="other",payer="shared"} 20`,
		`boxbroker_spend_usd_total{model="unknown",payer="other"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestMetrics_UnpricedModelSlotsAreTakenOnlyByAnsweredModels: a box
// naming a new junk model on each call, where the model is the box's
// request's alone (the answer named none the broker read: it was cut
// off, or came encoded) or is no model ID, would take the
// MaxUnpricedModels named slots of boxbroker_unpriced_calls_total, and a
// real unpriced model an upstream answered for afterwards would be
// counted as "other". Such names are "other" and take no slot; one an
// answer named is counted by its name, and so are its later calls
// however they were read.
func TestMetrics_UnpricedModelSlotsAreTakenOnlyByAnsweredModels(t *testing.T) {
	m := metrics.New()
	for i := range metrics.MaxUnpricedModels + 5 {
		m.UnpricedCall(fmt.Sprintf("claude-junk-%d", i), "claude-opus-4-1", "unpriced", false)
	}
	for _, name := range []string{"bbx_AAAAAAAAAAAAAAAAAAAAAAAAAAAA", strings.Repeat("a", 65), "claude junk", "claude\u00e9"} {
		m.UnpricedCall(name, "claude-opus-4-1", "unpriced", true)
	}
	m.UnpricedCall("claude-mystery-9", "claude-opus-4-1", "unpriced", true)
	m.UnpricedCall("claude-mystery-9", "claude-opus-4-1", "unpriced", false)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		`boxbroker_unpriced_calls_total{match="unpriced",model="claude-mystery-9",priced_as="claude-opus-4-1"} 2`,
		fmt.Sprintf(`boxbroker_unpriced_calls_total{match="unpriced",model="other",priced_as="claude-opus-4-1"} %d`, metrics.MaxUnpricedModels+5+4),
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "claude-junk-") || strings.Contains(text, "bbx_") {
		t.Errorf("/metrics names a model no answer named, or a token, in boxbroker_unpriced_calls_total")
	}
}

// TestMetrics_UsageModelSlotsAreTakenOnlyByAnsweredModels: a box naming
// a new junk model on each call whose answer named none the broker read
// (cut off, or encoded), so that the request's model stands for it,
// would take the MaxModels named places of boxbroker_spend_usd_total and
// boxbroker_tokens_total, and the model its calls are really answered by
// would be counted as "other" from then on. Such names are "other" and
// take no place; one an answer named is counted by its name, and so are
// its later calls however they were read.
func TestMetrics_UsageModelSlotsAreTakenOnlyByAnsweredModels(t *testing.T) {
	m := metrics.New()
	for i := range metrics.MaxModels + 5 {
		m.Usage(fmt.Sprintf("claude-junk-%d", i), "shared", false, 0, 1, 0, 0, 0)
	}
	m.Usage("claude-sonnet-4-5", "shared", true, 0, 10, 0, 0, 0)
	m.Usage("claude-sonnet-4-5", "shared", false, 0, 10, 0, 0, 0)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		`boxbroker_tokens_total{kind="input",model="claude-sonnet-4-5",payer="shared"} 20`,
		fmt.Sprintf(`boxbroker_tokens_total{kind="input",model="other",payer="shared"} %d`, metrics.MaxModels+5),
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "claude-junk-") {
		t.Errorf("/metrics names a model no answer named in boxbroker_tokens_total or boxbroker_spend_usd_total")
	}
}
