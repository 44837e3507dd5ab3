package postgres

import (
	"context"
	"embed"
	"github.com/intentius/boxbroker/internal/store/migrations"
)

// migrationFiles holds the schema, one file per version, named
// NNNN_what.sql and applied in order.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]migrations.Migration, error) {
	return migrations.Load(migrationFiles, "migrations/*.sql")
}

// migrate applies, in one transaction holding migrateLock, every migration
// the database has not recorded in schema_migrations. A database holding a
// version this binary does not know is refused.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate("migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit

	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLock); err != nil {
		return translate("migrate", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     NOT NULL PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return translate("migrate", err)
	}
	rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return translate("migrate", err)
	}
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return translate("migrate", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate("migrate", err)
	}
	todo, err := migrations.Pending(ms, applied)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return translate("migrate "+m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Version); err != nil {
			return translate("migrate "+m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return translate("migrate", err)
	}
	return nil
}
