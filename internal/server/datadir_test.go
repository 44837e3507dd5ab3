package server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_WarnsOfAnOpenDataDirectory: serving from a data directory
// others can read logs a warning naming it, and one its group may write
// says that group can put files there and remove boxbroker's; one only
// its owner can enter logs none.
func TestServe_WarnsOfAnOpenDataDirectory(t *testing.T) {
	tests := []struct {
		name  string
		mode  os.FileMode
		warn  bool
		group bool
	}{
		{"open to others", 0o755, true, false},
		{"open to the group", 0o750, true, false},
		{"written by the group", 0o770, true, true},
		{"the owner's alone", 0o700, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, tt.mode); err != nil {
				t.Fatal(err)
			}
			logs := &brokertest.Buffer{}
			brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.DataDir = dir }})
			got := strings.Contains(logs.String(), "the data directory can be read by others")
			if got != tt.warn {
				t.Errorf("data directory mode %#o: warned %v, want %v:\n%s", tt.mode, got, tt.warn, logs.String())
			}
			if got := strings.Contains(logs.String(), "its group can put files in it"); got != tt.group {
				t.Errorf("data directory mode %#o: warned of its group's files %v, want %v:\n%s", tt.mode, got, tt.group, logs.String())
			}
		})
	}
}
