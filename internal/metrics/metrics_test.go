package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestGrant_LabelStaysBounded(t *testing.T) {
	m := New()
	tests := []struct {
		outcome, counted string
	}{
		{GrantAccepted, GrantAccepted},
		{GrantRevoked, GrantRevoked},
		{"bba_some-grant-value-that-must-not-become-a-label", GrantError},
		{"", GrantError},
	}
	for _, tt := range tests {
		m.Grant(tt.outcome)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		`boxbroker_grant_checks_total{outcome="accepted"} 1`,
		`boxbroker_grant_checks_total{outcome="revoked"} 1`,
		`boxbroker_grant_checks_total{outcome="error"} 2`,
		`boxbroker_grant_checks_total{outcome="expired"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics after Grant calls lacks %q", want)
		}
	}
	if strings.Contains(text, "some-grant-value") {
		t.Errorf("/metrics holds a grant value passed as an outcome")
	}
}

func TestNil_RecordsNothing(t *testing.T) {
	var m *Metrics
	m.Request("inference", "/llm/anthropic/v1/messages", 200, "", time.Second, "")
	m.Upstream("inference", 200, time.Second, "")
	m.StreamOpened("inference")
	m.StreamClosed("inference")
	m.DeclarationReport(true)
	m.Grant(GrantAccepted)
	m.AuditWritten(1)
	m.AuditDropped()
	m.AuditFailed(1)
	if m.Handler() != nil || m.Registry() != nil {
		t.Errorf("nil Metrics has a handler or registry, want none")
	}
}
