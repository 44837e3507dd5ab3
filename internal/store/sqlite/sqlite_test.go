package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/migrations"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// openTemp opens a Store on a new file in the test's temporary directory.
func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "boxbroker.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v, want nil", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := openTemp(t)
		return s
	}, storetest.Clocked(func(t *testing.T, now func() time.Time) store.Store {
		s, _ := openTemp(t)
		s.Store.Now = now
		return s
	}), storetest.Replicas(func(t *testing.T, nows []func() time.Time) []store.Store {
		path := filepath.Join(t.TempDir(), "boxbroker.db")
		var rs []store.Store
		for _, now := range nows {
			s, err := Open(path)
			if err != nil {
				t.Fatalf("Open(%q) = %v, want nil", path, err)
			}
			t.Cleanup(func() { s.Close() })
			s.Store.Now = now
			rs = append(rs, s)
		}
		return rs
	}))
}

// TestStore_Bounded is the suite through a Bound beneath database/sql
// (package deadline): the driver's interfaces database/sql looks for
// reach it through the wrapper.
func TestStore_Bounded(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		b := deadline.New(5*time.Second, nil)
		s, err := Open(filepath.Join(t.TempDir(), "boxbroker.db"), WithAround(b.Around))
		if err != nil {
			t.Fatalf("Open(WithAround) = %v, want nil", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestTwoStoresShareAFile(t *testing.T) {
	ctx := t.Context()
	serve, path := openTemp(t)
	cli, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) a second time = %v, want nil", path, err)
	}
	defer cli.Close()

	// serve caches, so it reads the changes log: note where it stands.
	seq, err := serve.LastChange(ctx)
	if err != nil {
		t.Fatalf("LastChange() = %v", err)
	}
	if err := cli.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("cli.CreateBox(alpha) = %v, want nil", err)
	}
	if b, err := serve.BoxByTokenHash(ctx, "h1"); err != nil || b.Name != "alpha" {
		t.Errorf("serve.BoxByTokenHash(h1) = %q, %v, want alpha written by the other Store", b.Name, err)
	}
	if cs, err := serve.ChangesSince(ctx, seq, 10); err != nil || len(cs) != 1 || cs[0].Key != "alpha" {
		t.Errorf("serve.ChangesSince(%d) = %v, %v, want the other Store's CreateBox", seq, cs, err)
	}
	if err := serve.RotateToken(ctx, "alpha", "h2"); err != nil {
		t.Fatalf("serve.RotateToken(alpha) = %v, want nil", err)
	}
	if _, err := cli.BoxByTokenHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cli.BoxByTokenHash(old hash) = %v, want ErrNotFound", err)
	}

	// Both write at once; the busy timeout and IMMEDIATE transactions make
	// each wait for the other rather than fail.
	const n = 20
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = serve.SaveDeclaration(ctx, "alpha", "h2", []byte(`{"by":"serve"}`), time.Now()) })
		wg.Go(func() { errs[n+i] = cli.UpdateBox(ctx, store.Box{Name: "alpha", Paused: i%2 == 0}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent write %d from two Stores = %v, want nil", i, err)
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "boxbroker.db")
	for i := range 3 {
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open(%q) #%d = %v, want nil", path, i+1, err)
		}
		boxes, err := s.ListBoxes(ctx)
		if err != nil {
			t.Fatalf("ListBoxes() #%d = %v", i+1, err)
		}
		if len(boxes) != i {
			t.Errorf("ListBoxes() after reopening #%d = %d boxes, want %d", i+1, len(boxes), i)
		}
		if err := s.CreateBox(ctx, store.Box{Name: string(rune('a' + i)), TokenHash: string(rune('A' + i)), CreatedAt: time.Now()}); err != nil {
			t.Fatalf("CreateBox #%d = %v", i+1, err)
		}
		s.Close()
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := migrations.Load(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatalf("migrations.Load() = %v", err)
	}
	var count, max int
	if err := db.QueryRow("SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&count, &max); err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	if count != len(ms) || max != ms[len(ms)-1].Version {
		t.Errorf("schema_migrations after 3 opens = %d rows up to %d, want %d up to %d", count, max, len(ms), ms[len(ms)-1].Version)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v, want wal", mode, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	if _, err := s.w.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (9999, 0)"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s2, err := Open(path); err == nil {
		s2.Close()
		t.Errorf("Open(%q) of a database at schema 9999 = nil error, want refused", path)
	}
}

func TestOpenRefusesNonDatabase(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"empty path", ""},
		{"directory", t.TempDir()},
		{"missing parent", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, err := Open(tt.path); err == nil {
				s.Close()
				t.Errorf("Open(%q) = nil error, want one", tt.path)
			}
		})
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	s, _ := openTemp(t)
	s.Close()
	if err := s.Ping(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping() on a closed Store = %v, want ErrUnavailable", err)
	}
	if _, err := s.Box(context.Background(), "alpha"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Box() on a closed Store = %v, want ErrUnavailable", err)
	}
}

func TestMigrationsOrdered(t *testing.T) {
	// migrations.Load refuses versions that do not run 1, 2, ... without gaps.
	if _, err := migrations.Load(migrationFiles, "migrations/*.sql"); err != nil {
		t.Fatalf("migrations.Load() = %v", err)
	}
}

// The readers map the file (see Open): without it the owner's page reads
// a month of audit at 1,000 boxes page by page, four times slower.
func TestReadersMapTheFile(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "boxbroker.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var size int64
	if err := s.r.QueryRow("PRAGMA mmap_size").Scan(&size); err != nil || size != 256<<20 {
		t.Errorf("the readers' mmap_size = %d, %v; want %d", size, err, 256<<20)
	}
}

// TestReadOnly_WritesUnavailableNotRejected: a database that takes no
// write (its writer made query-only, as files made immutable refuse
// writes) answers every read and refuses every write with
// store.ErrUnavailable, never store.ErrRejected: an outage, which the
// spool waits out, not a batch set aside for good. The readiness check's
// write that changes nothing (PruneAudit before the year 1) fails too.
func TestReadOnly_WritesUnavailableNotRejected(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	storetest.CreateBoxForReadOnly(t, s)
	if _, err := s.w.ExecContext(ctx, "PRAGMA query_only = 1"); err != nil {
		t.Fatal(err)
	}
	storetest.ReadOnly(t, s)
}

// TestMigration0020_OldAdminTokensAreOperators: an admin token kept
// before tokens had a role keeps every right it had.
func TestMigration0020_OldAdminTokensAreOperators(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "boxbroker.db")
	db, _ := migratedTo(t, path, 19)
	if _, err := db.ExecContext(ctx, fmt.Sprintf(storetest.OldAdminToken, "1")); err != nil {
		t.Fatalf("an admin token before 0020: %v", err)
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(a store at 0019) = %v", err)
	}
	defer s.Close()
	tok, err := s.AdminToken(ctx, "adm-000000000001")
	if err != nil || tok.Role != store.AdminOperator {
		t.Errorf("AdminToken(made before 0020) = %+v, %v, want role %q", tok, err, store.AdminOperator)
	}
}

// TestMigration0021_OldFeedbackIsCounted: feedback kept before each box's
// totals were is counted, and bound, after migration 0021.
func TestMigration0021_OldFeedbackIsCounted(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "boxbroker.db")
	db, d := migratedTo(t, path, 20)
	exec := func(query string, args ...any) error {
		_, err := db.ExecContext(ctx, query, args...)
		return err
	}
	storetest.Migration0021(t, exec, d.Time(time.Now()), d.Words(nil), func() store.Store {
		db.Close()
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open(a store at 0020) = %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// migratedTo is a database at path with the migrations up to last
// applied, as a boxbroker before last+1 left it, and its dialect; the
// database is closed when t ends, if the test has not closed it.
func migratedTo(t *testing.T, path string, last int) (*sql.DB, dialect) {
	t.Helper()
	var o options
	db, err := o.open(dsn(path, url.Values{"_txlock": {"immediate"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d := dialect{&Store{w: db, now: time.Now, path: path}}
	if err := sqlstore.Migrate(t.Context(), db, d, storetest.MigrationsUpTo(t, migrationFiles, last), time.Now()); err != nil {
		t.Fatalf("migrating to %04d: %v", last, err)
	}
	return db, d
}
