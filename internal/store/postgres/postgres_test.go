package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/migrations"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

func TestMain(m *testing.M) {
	os.Exit(postgrestest.Main(m))
}

// freshSchema returns a DSN whose search_path is a schema of the test's own.
func freshSchema(t *testing.T) string {
	t.Helper()
	return postgrestest.Schema(t)
}

// open opens a Store on dsn, closed at cleanup.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open() = %v, want nil", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	postgrestest.DSN(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, freshSchema(t))
	}, storetest.Clocked(func(t *testing.T, now func() time.Time) store.Store {
		s := open(t, freshSchema(t))
		s.Store.Now = now
		return s
	}), storetest.Replicas(func(t *testing.T, nows []func() time.Time) []store.Store {
		dsn := freshSchema(t)
		var rs []store.Store
		for _, now := range nows {
			s := open(t, dsn)
			s.Store.Now = now
			rs = append(rs, s)
		}
		return rs
	}))
}

// TestStore_Bounded is the suite through a Bound beneath database/sql
// and pgx (package deadline): the driver's interfaces database/sql looks
// for (pgx's NamedValueChecker among them) reach it through the wrapper.
func TestStore_Bounded(t *testing.T) {
	postgrestest.DSN(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		b := deadline.New(5*time.Second, nil)
		s, err := Open(t.Context(), freshSchema(t), WithAround(b.Around))
		if err != nil {
			t.Fatalf("Open(WithAround) = %v, want nil", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestTwoStoresShareADatabase(t *testing.T) {
	ctx := t.Context()
	dsn := freshSchema(t)
	a, b := open(t, dsn), open(t, dsn)

	seq, err := a.LastChange(ctx)
	if err != nil {
		t.Fatalf("LastChange() = %v", err)
	}
	if err := b.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("b.CreateBox(alpha) = %v, want nil", err)
	}
	if got, err := a.BoxByTokenHash(ctx, "h1"); err != nil || got.Name != "alpha" {
		t.Errorf("a.BoxByTokenHash(h1) = %q, %v, want alpha written by the other Store", got.Name, err)
	}
	if cs, err := a.ChangesSince(ctx, seq, 10); err != nil || len(cs) != 1 || cs[0].Key != "alpha" {
		t.Errorf("a.ChangesSince(%d) = %v, %v, want the other Store's CreateBox", seq, cs, err)
	}
	if err := a.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h2", CreatedAt: time.Now()}); !errors.Is(err, store.ErrExists) {
		t.Errorf("a.CreateBox(alpha) after b made it = %v, want ErrExists", err)
	}
}

func TestOpenMigratesOnce(t *testing.T) {
	ctx := t.Context()
	dsn := freshSchema(t)

	// Replicas starting together: every Open succeeds and each migration
	// runs once.
	const n = 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := Open(ctx, dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open() #%d of %d at once = %v, want nil", i, n, err)
		}
	}

	s := open(t, dsn)
	if err := s.CreateBox(ctx, store.Box{Name: "kept", TokenHash: "h", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("CreateBox(kept) = %v", err)
	}
	s.Close()
	s = open(t, dsn)
	if _, err := s.Box(ctx, "kept"); err != nil {
		t.Errorf("Box(kept) after reopening = %v, want nil", err)
	}
	ms, err := migrations.Load(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatalf("migrations.Load() = %v", err)
	}
	var count, max int
	if err := s.pool.QueryRow(ctx, "SELECT COUNT(*), MAX(version) FROM schema_migrations").Scan(&count, &max); err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	if count != len(ms) || max != ms[len(ms)-1].Version {
		t.Errorf("schema_migrations after %d opens = %d rows up to %d, want %d up to %d", n+2, count, max, len(ms), ms[len(ms)-1].Version)
	}

	if _, err := s.pool.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES (9999)"); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(ctx, dsn); err == nil {
		s2.Close()
		t.Errorf("Open() of a database at schema 9999 = nil error, want refused")
	}
}

func TestOpenUnreachableIsUnavailable(t *testing.T) {
	// A loopback port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	dsn := fmt.Sprintf("postgres://boxbroker:hunter2@%s/boxbroker?sslmode=disable&connect_timeout=5", addr)
	s, err := Open(t.Context(), dsn)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) = nil error, want ErrUnavailable", addr)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open(%s) = %v, want ErrUnavailable", addr, err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open(%s) = %q, which holds the DSN's password", addr, err)
	}
}

func TestClosedIsUnavailable(t *testing.T) {
	s, err := Open(t.Context(), freshSchema(t))
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	s.Close()
	if err := s.Ping(t.Context()); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping() on a closed Store = %v, want ErrUnavailable", err)
	}
	if _, err := s.Box(t.Context(), "alpha"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Box() on a closed Store = %v, want ErrUnavailable", err)
	}
}

func TestOpenBadDSNKeepsPasswordOut(t *testing.T) {
	tests := []string{
		"postgres://boxbroker:hunter2@127.0.0.1:notaport/boxbroker",
		"host=127.0.0.1 port=notaport password=hunter2",
	}
	for _, tt := range tests {
		_, err := Open(t.Context(), tt)
		if err == nil {
			t.Errorf("Open(a malformed DSN) = nil error, want one")
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(a malformed DSN) = %q, which holds its password", err)
		}
	}
}

func TestMigrationsOrdered(t *testing.T) {
	// migrations.Load refuses versions that do not run 1, 2, ... without gaps.
	if _, err := migrations.Load(migrationFiles, "migrations/*.sql"); err != nil {
		t.Fatalf("migrations.Load() = %v", err)
	}
}

func TestListenHearsOtherStoresWrites(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	dsn := freshSchema(t)
	a, b := open(t, dsn), open(t, dsn)

	heard := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- a.Listen(ctx, func() { heard <- struct{}{} })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-heard:
		case err := <-done:
			t.Fatalf("Listen() = %v before %s", err, what)
		case <-time.After(30 * time.Second):
			t.Fatalf("Listen() never called notify for %s", what)
		}
	}
	wait("listening")
	if err := b.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "h1", CreatedAt: time.Now()}); err != nil {
		t.Fatalf("b.CreateBox(alpha) = %v", err)
	}
	wait("the other Store's CreateBox")
	if err := b.RotateToken(ctx, "alpha", "h2"); err != nil {
		t.Fatalf("b.RotateToken(alpha) = %v", err)
	}
	wait("the other Store's RotateToken")

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Listen() after its context ended = %v, want context.Canceled", err)
	}
}

func TestListenUnreachableIsUnavailable(t *testing.T) {
	s := open(t, freshSchema(t))
	// Point Listen's connection at a loopback port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.conn.Host, s.conn.Port = "127.0.0.1", uint16(port)
	s.conn.Fallbacks = nil
	if err := s.Listen(t.Context(), func() {}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Listen() with the server unreachable = %v, want ErrUnavailable", err)
	}
}

// TestAuditCommitsUnsynced checks that the audit log's transaction runs
// with synchronous_commit off and that the setting ends with it: the
// pool's connections keep the server's own.
func TestAuditCommitsUnsynced(t *testing.T) {
	postgrestest.DSN(t)
	s := open(t, freshSchema(t))
	ctx := t.Context()
	show := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) string {
		t.Helper()
		var v string
		if err := q.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := show(s.pool) // the test cluster runs with it off; production's default is on
	var inside string
	err := s.write(ctx, "test", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit TO on"); err != nil {
			return err
		}
		if err := unsynced(ctx, tx); err != nil {
			return err
		}
		inside = show(tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside != "off" {
		t.Errorf("synchronous_commit inside the audit's transaction is %q, want off", inside)
	}
	e := store.AuditEntry{Box: "b", At: time.Now(), Method: "POST", Route: "/x", Capability: "inference", Status: 200}
	if err := s.AddAudit(ctx, []store.AuditEntry{e, e}); err != nil {
		t.Fatal(err)
	}
	// The pool's connections, each asked once.
	for range 4 {
		if got := show(s.pool); got != base {
			t.Errorf("after the audit writes, synchronous_commit is %q, want the server's %q", got, base)
		}
	}
	list, err := s.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("%d audit entries stored, want 2", len(list))
	}
}

// TestReadOnly_WritesUnavailableNotRejected: a server that takes no write
// (default_transaction_read_only, as a standby or a server made
// read-only) answers every read and refuses every write with
// store.ErrUnavailable (SQLSTATE 25006), never store.ErrRejected: an
// outage, which the spool waits out, not a batch set aside for good. The
// readiness check's write that changes nothing (PruneAudit before the
// year 1) fails too.
func TestReadOnly_WritesUnavailableNotRejected(t *testing.T) {
	ctx := t.Context()
	dsn := freshSchema(t)
	storetest.CreateBoxForReadOnly(t, open(t, dsn))
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	// One connection, made read-only for its session.
	s := open(t, dsn+sep+"pool_max_conns=1")
	if _, err := s.pool.Exec(ctx, "SET SESSION default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	storetest.ReadOnly(t, s)
}

// TestMigration0020_OldAdminTokensAreOperators: an admin token kept
// before tokens had a role keeps every right it had.
func TestMigration0020_OldAdminTokensAreOperators(t *testing.T) {
	ctx := t.Context()
	dsn := freshSchema(t)
	db, _ := migratedTo(t, dsn, 19)
	if _, err := db.ExecContext(ctx, fmt.Sprintf(storetest.OldAdminToken, "now()")); err != nil {
		t.Fatalf("an admin token before 0020: %v", err)
	}

	s := open(t, dsn)
	tok, err := s.AdminToken(ctx, "adm-000000000001")
	if err != nil || tok.Role != store.AdminOperator {
		t.Errorf("AdminToken(made before 0020) = %+v, %v, want role %q", tok, err, store.AdminOperator)
	}
}

// TestMigration0021_OldFeedbackIsCounted: feedback kept before each box's
// totals were is counted, and bound, after migration 0021.
func TestMigration0021_OldFeedbackIsCounted(t *testing.T) {
	ctx := t.Context()
	dsn := freshSchema(t)
	db, d := migratedTo(t, dsn, 20)
	exec := func(query string, args ...any) error {
		_, err := db.ExecContext(ctx, query, args...)
		return err
	}
	storetest.Migration0021(t, exec, d.Time(time.Now()), d.Words(nil), func() store.Store { return open(t, dsn) })
}

// migratedTo is a database/sql handle on dsn with the migrations up to
// last applied, as a boxbroker before last+1 left it, and its dialect;
// closed when t ends.
func migratedTo(t *testing.T, dsn string, last int) (*sql.DB, dialect) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(pool.Close)
	t.Cleanup(func() { db.Close() })
	d := dialect{&Store{pool: pool}}
	if err := sqlstore.Migrate(t.Context(), db, d, storetest.MigrationsUpTo(t, migrationFiles, last), time.Now()); err != nil {
		t.Fatalf("migrating to %04d: %v", last, err)
	}
	return db, d
}

// TestIdleInTransaction: every connection of the store ends a
// transaction left waiting for its next statement IdleInTransaction
// long (its replica gone), unless the DSN sets the bound itself; the
// statement of a transaction so ended is store.ErrUnavailable.
func TestIdleInTransaction(t *testing.T) {
	dsn := freshSchema(t)
	bound := func(s *Store) string {
		var v string
		if err := s.R.QueryRowContext(t.Context(), "SHOW "+idleParam).Scan(&v); err != nil {
			t.Fatalf("SHOW %s = %v", idleParam, err)
		}
		return v
	}
	if got, want := bound(open(t, dsn)), fmt.Sprintf("%dms", IdleInTransaction.Milliseconds()); got != want && got != IdleInTransaction.String() {
		t.Errorf("%s = %s, want %s", idleParam, got, IdleInTransaction)
	}
	sep := " "
	if strings.Contains(dsn, "://") {
		sep = "&"
	}
	s := open(t, dsn+sep+idleParam+"=300")
	if got := bound(s); got != "300ms" {
		t.Errorf("%s with the DSN's 300 = %s, want 300ms", idleParam, got)
	}
	err := s.write(t.Context(), "idle", func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), "SELECT 1"); err != nil {
			return err
		}
		time.Sleep(time.Second)
		_, err := tx.Exec(t.Context(), "SELECT 1")
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a statement after its transaction waited past the bound = %v, want ErrUnavailable", err)
	}
}
