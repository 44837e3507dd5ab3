package sqlstore

import (
	"context"
	"time"

	"github.com/intentius/boxbroker/internal/store/migrations"
)

// Migrate applies, in one transaction on db (begun after the dialect's
// LockMigrations), every migration of ms the database has not recorded
// in schema_migrations, recording each at now. A database holding a
// version ms does not know is refused.
func Migrate(ctx context.Context, db Beginner, d Dialect, ms []migrations.Migration, now time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return d.Translate("migrate", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := d.LockMigrations(ctx, tx); err != nil {
		return d.Translate("migrate", err)
	}
	if _, err := tx.ExecContext(ctx, d.MigrationsTable()); err != nil {
		return d.Translate("migrate", err)
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return d.Translate("migrate", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return d.Translate("migrate", err)
		}
		applied[v] = true
	}
	if err := rows.Close(); err != nil {
		return d.Translate("migrate", err)
	}
	if err := rows.Err(); err != nil {
		return d.Translate("migrate", err)
	}
	todo, err := migrations.Pending(ms, applied)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return d.Translate("migrate "+m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", m.Version, d.Time(now)); err != nil {
			return d.Translate("migrate "+m.Name, err)
		}
	}
	return d.Translate("migrate", tx.Commit())
}
