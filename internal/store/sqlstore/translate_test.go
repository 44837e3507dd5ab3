package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// TestTranslate_OneMappingForBothDrivers: the part of the error mapping
// both backends share (sentinels kept, database/sql's own errors) and how
// a driver's sentinel is written: store.ErrUnavailable and
// store.ErrRejected keep the driver's message, store.ErrExists and
// store.ErrNotFound do not.
func TestTranslate_OneMappingForBothDrivers(t *testing.T) {
	errExists := errors.New("driver: unique violation")
	errBusy := errors.New("driver: busy")
	errRange := errors.New("driver: out of range")
	errOther := errors.New("driver: other")
	driver := func(err error) error {
		switch err {
		case errExists:
			return store.ErrExists
		case errBusy:
			return store.ErrUnavailable
		case errRange:
			return store.ErrRejected
		}
		return nil
	}
	tests := []struct {
		name    string
		err     error
		want    error // nil: none of the sentinels
		message bool  // the driver's message is kept
	}{
		{"sentinel kept", store.ErrNotFound, store.ErrNotFound, false},
		{"no rows", sql.ErrNoRows, store.ErrNotFound, false},
		{"deadline", context.DeadlineExceeded, store.ErrUnavailable, true},
		{"connection done", sql.ErrConnDone, store.ErrUnavailable, true},
		{"database closed", errors.New("sql: database is closed"), store.ErrUnavailable, true},
		{"driver: exists", errExists, store.ErrExists, false},
		{"driver: unavailable", errBusy, store.ErrUnavailable, true},
		{"driver: rejected", errRange, store.ErrRejected, true},
		{"driver: other", errOther, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Translate("op", tt.err, driver)
			if !strings.HasPrefix(got.Error(), "op: ") {
				t.Errorf("Translate(%v) = %q, want it prefixed with the op", tt.err, got)
			}
			for _, s := range []error{store.ErrNotFound, store.ErrExists, store.ErrUnavailable, store.ErrRejected} {
				if errors.Is(got, s) != (s == tt.want) {
					t.Errorf("Translate(%v) = %v; errors.Is(%v) = %v, want %v", tt.err, got, s, errors.Is(got, s), s == tt.want)
				}
			}
			// A sentinel kept is its own message.
			if kept := strings.Contains(got.Error(), tt.err.Error()); kept != tt.message && tt.want != tt.err {
				t.Errorf("Translate(%v) = %q; the driver's message kept = %v, want %v", tt.err, got, kept, tt.message)
			}
		})
	}
	if err := Translate("op", nil, driver); err != nil {
		t.Errorf("Translate(nil) = %v, want nil", err)
	}
}
