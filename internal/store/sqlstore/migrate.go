package sqlstore

import (
	"context"
	"io/fs"
	"time"

	"github.com/intentius/boxbroker/internal/store/migrations"
)

// Migrate applies, in one transaction on db (begun after the dialect's
// LockMigrations), every migration in files (migrations/NNNN_what.sql,
// applied in order) the database has not recorded in schema_migrations,
// recording each at now. A database holding a version files does not
// know is refused.
func Migrate(ctx context.Context, db Beginner, d Dialect, files fs.FS, now time.Time) error {
	ms, err := migrations.Load(files, "migrations/*.sql")
	if err != nil {
		return err
	}
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
	versions, err := all(ctx, tx, "SELECT version FROM schema_migrations", value[int])
	if err != nil {
		return d.Translate("migrate", err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
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
