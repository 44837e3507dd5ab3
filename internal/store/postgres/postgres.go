// Package postgres is boxbroker's store for several replicas: a store.Store
// kept in PostgreSQL through a pgx connection pool.
//
// The schema is the ordered list of SQL files in migrations/, applied at
// Open inside one transaction under an advisory lock, so that replicas
// starting together migrate once, and recorded in schema_migrations.
//
// Every write appends its changes to the changes log last in its
// transaction, under a transaction-scoped advisory lock: no two writers hold
// it at once, so changes commit in Seq order and a cache that reads the log
// never passes over a change that commits later with a lower Seq. Each such
// write also notifies its schema's channel, so that caches can read the log at once
// rather than at their next poll (Listen).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jackc/puddle/v2"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// Advisory lock keys, in PostgreSQL's one 64-bit key space.
const (
	// migrateLock is held while the schema is migrated.
	migrateLock int64 = 0x626f7862726f6b01 // "boxbrok" 01
	// changesLock is held from a write's first change until it commits
	// (dialect.LogChanges).
	changesLock int64 = 0x626f7862726f6b02
)

// Store is a store.Store kept in PostgreSQL. Its methods are safe for
// concurrent use, and any number of Stores, in any number of processes,
// may share one database.
type Store struct {
	// Store is the store's SQL, shared with SQLite, over pool through
	// database/sql.
	*sqlstore.Store
	pool *pgxpool.Pool
	// conn configures Listen's connection, which is not the pool's.
	conn *pgx.ConnConfig
	// channel is the notification channel of the store's schema, quoted.
	channel string
	// around runs each of the calls made through pgx itself rather than
	// database/sql (the transactions of write, Ping, Clock), as the
	// database/sql driver's operations are run (see WithAround); it
	// runs them as they are while Open works.
	around deadline.Around
}

var _ store.Store = (*Store)(nil)

// Open connects to the PostgreSQL database named by dsn (a postgres:// URL
// or key=value string, as pgx reads it) and brings its schema up to date.
// It returns an error wrapping store.ErrUnavailable when the server cannot
// be reached. The DSN's text, which may hold a password, is never put in an
// error.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("open postgres store: the DSN cannot be parsed")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleParam]; !set {
		cfg.AfterConnect = boundIdleInTransaction
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, translate("open postgres store", err)
	}
	around, on := deadline.Later(deadline.Chain(o.around, deadline.Unavailable(translate)))
	s := &Store{pool: pool, conn: cfg.ConnConfig.Copy(), around: around}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if o.around != nil {
		db = sql.OpenDB(deadline.Connector(stdlib.GetPoolConnector(pool), around))
		db.SetMaxIdleConns(0) // the pgx pool keeps them (as OpenDBFromPool)
	}
	// One transaction holding migrateLock applies every migration the
	// database has not recorded.
	if err := sqlstore.Migrate(ctx, db, dialect{s}, migrationFiles, time.Now()); err != nil {
		db.Close()
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		pool.Close()
		return nil, translate("open postgres store: read the schema's name", err)
	}
	s.channel = pgx.Identifier{Channel + "." + schema}.Sanitize()
	if s.Store, err = sqlstore.New(db, db, dialect{s}); err != nil {
		db.Close()
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	on()
	return s, nil
}

// IdleInTransaction is how long PostgreSQL lets a transaction of the
// store's wait for its next statement before it ends the session and
// rolls the transaction back (idle_in_transaction_session_timeout, set
// on each connection unless the DSN sets it). A replica sends a
// transaction's statements one after another, and gives up a call its
// store does not answer at the call's deadline; a transaction that waits
// this long is one whose replica has vanished mid-write (its host lost,
// its link black-holed), which PostgreSQL would otherwise keep, with its
// locks, until TCP's keepalive ends the connection, hours later. Its
// locks include changesLock, which every write that logs a change takes:
// every replica's reports and admin writes would wait on it meanwhile.
const IdleInTransaction = 10 * time.Second

// idleParam is IdleInTransaction's setting.
const idleParam = "idle_in_transaction_session_timeout"

// boundIdleInTransaction sets IdleInTransaction on a new connection.
func boundIdleInTransaction(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SET "+idleParam+" = "+strconv.FormatInt(IdleInTransaction.Milliseconds(), 10))
	return err
}

// Option is an option of Open.
type Option func(*options)

type options struct {
	around deadline.Around
}

// WithAround runs every operation of the store's database/sql driver,
// and each call the store makes through pgx itself, through a (package
// deadline's Bound.Around): the store's one place where its calls are
// bounded. Errors that mean the server cannot be used now (unreachable,
// shutting down, read-only, a lost connection) reach a as
// store.ErrUnavailable. Open's own work (migrations) is not run through
// a. Listen's connection is not either: it waits for notifications for
// as long as the store is open, and its loss is Listen's error.
func WithAround(a deadline.Around) Option {
	return func(o *options) { o.around = a }
}

// Ping reports whether the database answers; store.ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	return translate("ping", s.around(ctx, deadline.Op{Name: "ping", Kind: deadline.Read}, s.pool.Ping))
}

// Close closes every connection. The Store must not be used afterwards.
func (s *Store) Close() error {
	err := errors.Join(s.Store.Close(), s.Store.W.Close())
	s.pool.Close()
	return err
}

// write runs fn in one transaction through pgx, for the writes that use
// pgx's own batches and COPY (Dialect.Spend, AddAudit), and commits.
// They write no change to the changes log. Errors are translated to the
// store's sentinels, prefixed with op.
func (s *Store) write(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return translate(op, s.around(ctx, deadline.Op{Name: op, Kind: deadline.Write}, func(ctx context.Context) error {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
}

// translate turns a driver error into the store's sentinels (see
// sqlstore.Translate): pgx.ErrNoRows and a foreign key violation (the
// box named does not exist) into store.ErrNotFound, a unique violation
// into store.ErrExists, a server that cannot be reached, is shutting
// down or is out of resources, a lost connection, a closed pool or a
// read-only server into store.ErrUnavailable, and what the server
// refuses for what was written (a data exception such as a bigint out of
// range or a byte its encoding cannot hold, another integrity
// constraint, a program limit) into store.ErrRejected.
func translate(op string, err error) error {
	return sqlstore.Translate(op, err, func(err error) error {
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			switch {
			case pe.Code == "23505": // unique_violation
				return store.ErrExists
			case pe.Code == "23503": // foreign_key_violation
				return store.ErrNotFound
			case strings.HasPrefix(pe.Code, "08"), // connection exception
				strings.HasPrefix(pe.Code, "53"),                           // insufficient resources
				strings.HasPrefix(pe.Code, "58"),                           // system error
				pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // shutting down, cannot connect now
				pe.Code == "25P03", // idle_in_transaction_session_timeout: the session ended
				pe.Code == "25006": // read_only_sql_transaction: a standby, or a server made read-only
				return store.ErrUnavailable
			case strings.HasPrefix(pe.Code, "22"), // data exception: out of range, bad encoding
				strings.HasPrefix(pe.Code, "23"), // another integrity constraint
				strings.HasPrefix(pe.Code, "54"): // program limit exceeded
				return store.ErrRejected
			}
			return nil
		}
		var ce *pgconn.ConnectError
		var ne net.Error
		if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
			errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, puddle.ErrClosedPool) || errors.Is(err, net.ErrClosed) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return store.ErrUnavailable
		}
		return nil
	})
}
