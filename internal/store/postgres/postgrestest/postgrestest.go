// Package postgrestest gives tests a PostgreSQL database of their own: a
// fresh schema on the server BOXBROKER_TEST_POSTGRES names, or on a
// throwaway cluster started in a temporary directory (loopback only, trust
// authentication) the first time a test asks for one.
//
// A package whose tests use it calls Main from its TestMain, so that a
// cluster it started is stopped when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(postgrestest.Main(m)) }
//
// Where no PostgreSQL can be had, Schema and DSN skip the test saying why,
// or fail it when BOXBROKER_REQUIRE_POSTGRES is set, as it is in CI.
package postgrestest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the variable holding the DSN of a server to test against;
// EnvRequire, when set, makes a missing server a failure rather than a skip.
const (
	EnvDSN     = "BOXBROKER_TEST_POSTGRES"
	EnvRequire = "BOXBROKER_REQUIRE_POSTGRES"
)

// server is the one PostgreSQL a test binary uses. mu guards every field.
var server struct {
	mu      sync.Mutex
	inMain  bool     // Main is running the tests
	tried   bool     // a server was looked for
	dsn     string   // "" when there is none
	skip    string   // why there is none
	cluster *cluster // the cluster started here, if any
}

// Main runs the tests and stops the cluster, if a test started one. Call it
// from TestMain and exit with what it returns.
func Main(m *testing.M) int {
	server.mu.Lock()
	server.inMain = true
	server.mu.Unlock()
	code := m.Run()
	server.mu.Lock()
	defer server.mu.Unlock()
	if server.cluster != nil {
		server.cluster.stop()
		server.cluster = nil
	}
	return code
}

// DSN returns the DSN of the test server, starting a throwaway cluster the
// first time when BOXBROKER_TEST_POSTGRES is unset; with no server to be
// had it skips t (fails it when BOXBROKER_REQUIRE_POSTGRES is set).
func DSN(t testing.TB) string {
	t.Helper()
	server.mu.Lock()
	defer server.mu.Unlock()
	if !server.tried {
		if !server.inMain {
			t.Fatal("postgrestest: call postgrestest.Main from the package's TestMain, so that the cluster is stopped")
		}
		server.tried = true
		if dsn := os.Getenv(EnvDSN); dsn != "" {
			server.dsn = dsn
		} else if c, err := startCluster(); err != nil {
			server.skip = fmt.Sprintf("no PostgreSQL to test against (%v): set %s to a DSN "+
				"(eval \"$(.ci/postgres.sh)\" starts one and sets it), or install PostgreSQL so that initdb and pg_ctl "+
				"are in /usr/lib/postgresql/*/bin", err, EnvDSN)
		} else {
			server.cluster = c
			server.dsn = c.dsn
		}
	}
	if server.dsn == "" {
		if os.Getenv(EnvRequire) != "" {
			t.Fatal(server.skip)
		}
		t.Skip(server.skip)
	}
	return server.dsn
}

// Schema creates a schema no other test uses, dropped when t ends, and
// returns a DSN whose search_path is that schema. It skips t as DSN does.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := DSN(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "storetest_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close(ctx)
		t.Fatalf("CREATE SCHEMA %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("DROP SCHEMA %s: %v", schema, err)
		}
		admin.Close(ctx)
	})
	return WithSearchPath(dsn, schema)
}

// WithSearchPath is dsn, in either of its forms, with search_path set.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
