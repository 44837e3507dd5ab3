package server_test

import (
	"os"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// TestServe_WarnsOfAnOpenDataDirectory: serving from a data directory
// others can read logs a warning naming it; one only its owner can enter
// logs none.
func TestServe_WarnsOfAnOpenDataDirectory(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		warn bool
	}{
		{"open to others", 0o755, true},
		{"open to the group", 0o750, true},
		{"the owner's alone", 0o700, false},
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
		})
	}
}
