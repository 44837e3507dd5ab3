package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/server"
)

// misnamed is a capability whose name is no capability name, which
// broker.New refuses: late in server.New, after the store, the spool and
// the journal are open.
type misnamed struct{}

func (misnamed) Name() string               { return "Not A Name!" }
func (misnamed) Prefixes() []string         { return []string{"/misnamed"} }
func (misnamed) Routes() []capability.Route { return nil }
func (misnamed) Scopes(*http.Request) (capability.Need, bool, error) {
	return capability.Need{}, false, nil
}
func (misnamed) Serve(http.ResponseWriter, *http.Request, *capability.Call) error { return nil }

// TestNew_FailingClosesWhatItOpened: a New that fails after opening the
// store, the spool and the journal closes them again. The journal, closed
// with nothing in it, removes its file and lets go of its lock; left open,
// its file would stay in the data directory.
func TestNew_FailingClosesWhatItOpened(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, Listen: "127.0.0.1:0", AdminListen: "off"}
	_, err := server.New(t.Context(), cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Extra: []capability.Capability{misnamed{}}})
	if err == nil {
		t.Fatal("New with a misnamed capability = nil error, want one")
	}
	journals, _ := filepath.Glob(filepath.Join(dir, "journal-*"))
	if len(journals) != 0 {
		t.Errorf("after a failed New the data directory holds %v, want no journal: it was left open", journals)
	}
	// The data directory serves a New at once.
	srv, err := server.New(t.Context(), cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New after a failed New: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, server.DBFile)); err != nil {
		t.Errorf("store file: %v", err)
	}
}
