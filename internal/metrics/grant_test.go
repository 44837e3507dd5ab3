package metrics_test

import (
	"testing"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/payer"
)

// TestGrant_OutcomesAreTheGrantCodes keeps the metric's label values the
// outcomes the payer reports, so none is counted as an error.
func TestGrant_OutcomesAreTheGrantCodes(t *testing.T) {
	known := map[string]bool{
		metrics.GrantAccepted: true, metrics.GrantMalformed: true, metrics.GrantUnknown: true, metrics.GrantOtherBox: true,
		metrics.GrantExpired: true, metrics.GrantRevoked: true, metrics.GrantNoCredential: true, metrics.GrantUnavailable: true,
	}
	for _, o := range append(append([]string(nil), grant.Outcomes...), payer.Unavailable) {
		if !known[o] {
			t.Errorf("grant outcome %q has no metrics.Grant* constant; it would be counted as %q", o, metrics.GrantError)
		}
	}
}
