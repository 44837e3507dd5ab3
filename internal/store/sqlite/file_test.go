package sqlite

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// TestCheckFile_RemovedOrReplaced: CheckFile is nil while the path is
// the file opened; once the file is removed, or another put in its
// place, it says so for good (store.ErrUnavailable and ErrFileGone), and
// every write and Ping fails with it.
func TestCheckFile_RemovedOrReplaced(t *testing.T) {
	tests := []struct {
		name string
		do   func(path string) error
	}{
		{"removed", os.Remove},
		{"replaced", func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.WriteFile(path, nil, 0o600)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, path := openTemp(t)
			if err := s.CheckFile(); err != nil {
				t.Fatalf("CheckFile() on the file opened = %v, want nil", err)
			}
			if err := tt.do(path); err != nil {
				t.Fatal(err)
			}
			err := s.CheckFile()
			if !errors.Is(err, ErrFileGone) || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("CheckFile() once %s = %v, want ErrFileGone and store.ErrUnavailable", tt.name, err)
			}
			if err := s.CreateBox(t.Context(), store.Box{Name: "late", TokenHash: "h", CreatedAt: time.Now()}); !errors.Is(err, ErrFileGone) {
				t.Errorf("CreateBox once %s = %v, want ErrFileGone", tt.name, err)
			}
			if err := s.Ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("Ping once %s = %v, want store.ErrUnavailable", tt.name, err)
			}
		})
	}
}
