package server_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// TestServe_RefusesTheSpoolOfAnotherStore: a data directory whose spool
// holds the records of one store is refused by a server started on
// another store, saying which store they belong to and where they are;
// started on its own store again, the server applies them, so nothing is
// lost.
func TestServe_RefusesTheSpoolOfAnotherStore(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cfg := server.Config{DataDir: data}
	own, other := filepath.Join(t.TempDir(), "own.db"), filepath.Join(t.TempDir(), "other.db")
	open := func(path string) server.Options {
		st, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return server.Options{Store: st}
	}
	srv, err := server.New(ctx, cfg, open(own))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Spool.Append(outbox.Batch{Audit: []store.AuditEntry{{Route: "/spooled", Method: "GET", Status: 200}}}); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	ot := open(other)
	defer ot.Store.Close()
	srv, err = server.New(ctx, cfg, ot)
	var fe *outbox.ForeignError
	if !errors.As(err, &fe) {
		if srv != nil {
			srv.Close()
		}
		t.Fatalf("server.New on another store = %v, want an *outbox.ForeignError", err)
	}
	t.Logf("server.New on another store: %v", err)
	if spool := filepath.Join(data, outbox.SpoolFile); !strings.Contains(err.Error(), spool) || !strings.Contains(err.Error(), fe.Theirs) {
		t.Errorf("server.New error = %q, want it to name %s and the store %s", err, spool, fe.Theirs)
	}

	srv, err = server.New(ctx, cfg, open(own))
	if err != nil {
		t.Fatalf("server.New on its own store again = %v", err)
	}
	defer srv.Close()
	if n, err := srv.Replay(ctx); n != 1 || err != nil {
		t.Errorf("ReplaySpool on its own store = %d, %v; want 1, nil", n, err)
	}
}
