package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// hoursDown is a store whose audit hours cannot be read for now.
type hoursDown struct{ store.Store }

func (hoursDown) AuditHours(context.Context, string, time.Time) ([]store.HourCount, error) {
	return nil, fmt.Errorf("audit hours: %w", store.ErrUnavailable)
}

// TestUI_StoreUnavailableSaysSo: a view whose store read finds the store
// unavailable answers 503 saying so, the list of boxes and a box's page
// alike (adapt maps the store's error for every view).
func TestUI_StoreUnavailableSaysSo(t *testing.T) {
	s, _, _, _, cookie := testPage(t, func(st store.Store) store.Store { return hoursDown{st} }, func(store.Store) Config { return Config{} })
	for _, path := range []string{"/ui/", "/ui/boxes/alpha"} {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "cannot read its store just now") {
			t.Errorf("GET %s with the store unavailable = %d, want 503 saying so:\n%s", path, rec.Code, rec.Body.String())
		}
	}
}
