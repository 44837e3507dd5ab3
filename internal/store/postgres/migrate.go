package postgres

import (
	"context"
	"database/sql"
	"embed"
	"time"

	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// migrationFiles holds the schema, one file per version, named
// NNNN_what.sql and applied in order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies, in one transaction holding migrateLock, every
// migration the database has not recorded (see sqlstore.Migrate).
func (s *Store) migrate(ctx context.Context, db *sql.DB) error {
	return sqlstore.Migrate(ctx, db, dialect{s}, migrationFiles, time.Now())
}

// LockMigrations holds migrateLock until the migration commits, so that
// replicas starting together migrate once.
func (dialect) LockMigrations(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock)
	return err
}

// MigrationsTable makes schema_migrations if it is missing.
func (dialect) MigrationsTable() string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`
}
