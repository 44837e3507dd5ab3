package postgres

import (
	"context"
	"database/sql"
	"embed"
)

// migrationFiles holds the schema, one file per version, named
// NNNN_what.sql and applied in order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

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
