//go:build unix

package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReady_LinkPlantedAtItsFileIsRefused: a link that a user who may
// write into the data directory put at the file the readiness check
// writes, leading to a file of the operator's, fails the check, naming
// it a link, and the file it leads to is left as it was (every /readyz
// truncated it and wrote "ready" into it).
func TestReady_LinkPlantedAtItsFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "operators-file")
	if err := os.WriteFile(victim, []byte("the operator's own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, readyFile)); err != nil {
		t.Fatal(err)
	}
	if err := writable(dir); err == nil || !strings.Contains(err.Error(), "a link") {
		t.Errorf("writable with its file a link = %v, want a refusal naming it a link", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "the operator's own\n" {
		t.Errorf("the operator's file holds %q, want it untouched", b)
	}
}
