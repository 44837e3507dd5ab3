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
		m.Usage(fmt.Sprintf("claude-model-%d", i), "shared", 1_000_000, 10, 5, 0, 0)
	}
	const tok = "bbx_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	m.Usage(tok, "owner", 1000, 1, 1, 1, 1)
	m.Usage(strings.Repeat("a", 65), "visitor", 0, 1, 0, 0, 0)
	m.Usage("", "who-knows", 0, 1, 0, 0, 0)

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
