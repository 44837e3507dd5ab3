package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/payer"
)

// TestGrant_OutcomesAreTheGrantCodes keeps the metric's label values the
// outcomes the payer reports, so none is counted as an error.
func TestGrant_OutcomesAreTheGrantCodes(t *testing.T) {
	m := metrics.New()
	outcomes := append(append([]string(nil), grant.Outcomes...), payer.Unavailable)
	for _, o := range outcomes {
		m.Grant(o)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, o := range outcomes {
		if want := fmt.Sprintf("boxbroker_grant_checks_total{outcome=%q} 1\n", o); !strings.Contains(text, want) {
			t.Errorf("grant outcome %q is not counted under its own label; it would be counted as %q", o, metrics.GrantError)
		}
	}
	if want := fmt.Sprintf("boxbroker_grant_checks_total{outcome=%q} 0\n", metrics.GrantError); !strings.Contains(text, want) {
		t.Errorf("/metrics after every grant outcome lacks %q", want)
	}
}
