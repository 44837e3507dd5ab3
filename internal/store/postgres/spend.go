package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlstore"
)

// Spend runs fn in one transaction through pgx (see write), where a
// settlement's upserts go to the server in one batch and audit entries
// by COPY. undo is not needed: the write ends with its caller's context.
func (d dialect) Spend(ctx context.Context, op string, fn, _ func(ctx context.Context, tx sqlstore.SpendTx) error) error {
	return d.s.write(ctx, op, func(tx pgx.Tx) error { return fn(ctx, spendTx{tx}) })
}

// spendTx is a pgx transaction as a sqlstore.SpendTx.
type spendTx struct{ tx pgx.Tx }

func (t spendTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (t spendTx) QueryRow(ctx context.Context, query string, args ...any) sqlstore.Scanner {
	return sqlstore.NoRow[pgx.Row]{Row: t.tx.QueryRow(ctx, query, args...)}
}

func (spendTx) Time(t time.Time) any { return t.UTC() }

func (spendTx) Now(ago time.Duration) string { return dialect{}.Now(ago) }

func (spendTx) ForKeyShare() string { return dialect{}.ForKeyShare() }

func (t spendTx) Each(ctx context.Context, query string, args []any, row func(sqlstore.Scanner) error) error {
	rows, err := t.tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlstore.EachRow(rows, row)
}

// ExecAll sends stmts in one batch.
func (t spendTx) ExecAll(ctx context.Context, stmts []sqlstore.Stmt) error {
	if len(stmts) < 2 {
		for _, st := range stmts {
			if _, err := t.tx.Exec(ctx, st.Query, st.Args...); err != nil {
				return err
			}
		}
		return nil
	}
	var b pgx.Batch
	for _, st := range stmts {
		b.Queue(st.Query, st.Args...)
	}
	return t.tx.SendBatch(ctx, &b).Close()
}

// AddAudit writes entries by COPY.
func (t spendTx) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	_, err := t.tx.CopyFrom(ctx, pgx.Identifier{"audit"}, auditColumns, auditRows(entries))
	return err
}
