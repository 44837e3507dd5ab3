package sqlite

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

// LockMigrations takes nothing: the migration's transaction is
// IMMEDIATE, which holds the database's write lock.
func (dialect) LockMigrations(context.Context, *sql.Tx) error { return nil }

// MigrationsTable makes schema_migrations if it is missing.
func (dialect) MigrationsTable() string {
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`
}
