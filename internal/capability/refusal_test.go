package capability_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TestRefusals_Table holds the refusal table to the statuses and types
// the broker's refusals are documented with: each reason's status, and
// the type the protocol pairs with it.
func TestRefusals_Table(t *testing.T) {
	tests := []struct {
		reason string
		status int
		typ    string
	}{
		{capability.ReasonToken, 403, protocol.TypePermission},
		{capability.ReasonDeclaration, 403, protocol.TypePermission},
		{capability.ReasonBudget, 403, protocol.TypePermission},
		{capability.ReasonLimit, 429, protocol.TypeRateLimit},
		{capability.ReasonRate, 429, protocol.TypeRateLimit},
		{capability.ReasonStore, 503, protocol.TypeAPI},
		{capability.ReasonCannotRecord, 503, protocol.TypeAPI},
		{capability.ReasonNoRoute, 404, protocol.TypeNotFound},
		{capability.ReasonMethod, 405, protocol.TypeInvalid},
		{capability.ReasonEncoding, 415, protocol.TypeInvalid},
		{capability.ReasonTooLarge, 413, protocol.TypeTooLarge},
		{capability.ReasonInvalid, 400, protocol.TypeInvalid},
		{capability.ReasonNotSupported, 501, protocol.TypeNotSupported},
		{capability.ReasonTimeout, 504, protocol.TypeTimeout},
		{capability.ReasonUpstream, 502, protocol.TypeAPI},
		{capability.ReasonInternal, 500, protocol.TypeAPI},
	}
	for _, tt := range tests {
		e := capability.Refuse(tt.reason, "m %d", 1)
		if e.Status != tt.status || e.Type != tt.typ || e.Reason != tt.reason || e.Message != "m 1" {
			t.Errorf("Refuse(%q) = %d %s %q %q, want %d %s", tt.reason, e.Status, e.Type, e.Reason, e.Message, tt.status, tt.typ)
		}
	}
	// A reason without a row of its own falls to the table's 502: only
	// these are meant to.
	badGateway := map[string]bool{capability.ReasonUpstreamFailed: true, capability.ReasonUpstream: true,
		capability.ReasonMintRefused: true, capability.ReasonMintFailed: true, capability.ReasonAborted: true, capability.ReasonTokenSeen: true}
	for _, r := range capability.Reasons {
		if s := capability.Status(r); s == http.StatusBadGateway && !badGateway[r] {
			t.Errorf("Status(%q) = 502, the status of no row: give the reason its row in the refusal table", r)
		}
	}
	if e := capability.Refuse(capability.ReasonToken, "t").At(http.StatusUnauthorized); e.Status != 401 || e.Type != protocol.TypeAuthn || e.Reason != capability.ReasonToken {
		t.Errorf("Refuse(token).At(401) = %d %s %q, want 401 %s token", e.Status, e.Type, e.Reason, protocol.TypeAuthn)
	}
}

// TestOf maps internal errors to the refusals the box is shown, in the
// one errors.Is switch.
func TestOf(t *testing.T) {
	own := capability.Refuse(capability.ReasonPaused, "p")
	tests := []struct {
		name   string
		err    error
		status int
		reason string
	}{
		{"a refusal, wrapped", fmt.Errorf("serve: %w", own), 403, capability.ReasonPaused},
		{"the store's outage", fmt.Errorf("get box: %w", store.ErrUnavailable), 503, capability.ReasonStore},
		{"a body over its bound", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, capability.ReasonTooLarge},
		{"any other error", errors.New("disk on fire"), 502, capability.ReasonInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := capability.Of(tt.err)
			if e.Status != tt.status || e.Reason != tt.reason {
				t.Errorf("Of(%v) = %d %q, want %d %q", tt.err, e.Status, e.Reason, tt.status, tt.reason)
			}
			if e.Message == "" || e.Message == tt.err.Error() {
				t.Errorf("Of(%v) message = %q, want one of the broker's, never the error's text", tt.err, e.Message)
			}
		})
	}
}
