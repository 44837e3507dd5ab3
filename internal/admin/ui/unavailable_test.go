package ui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
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
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	k, _, err := secrets.Load(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := admin.New(admin.Config{Store: hoursDown{sq}, Keyring: k, Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := New(s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Operator().AddBox(t.Context(), operator.NewBox{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	_, tok, err := operator.Mint(t.Context(), sq, "t", s.Config().Now())
	if err != nil {
		t.Fatal(err)
	}
	sess, err := u.newSession(tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	if err := u.startSession(rec, httptest.NewRequest("GET", "/ui/", nil), sess); err != nil {
		t.Fatal(err)
	}
	cookie := rec.Result().Cookies()[0]
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
