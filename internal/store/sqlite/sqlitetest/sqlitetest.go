// Package sqlitetest makes SQLite stores for tests and benchmarks that
// need many rows quickly: written in one transaction, straight into the
// tables, rather than one store write at a time.
package sqlitetest

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// FleetName is the name Fleet gives its i-th box: box-000000, box-000001...
func FleetName(i int) string { return fmt.Sprintf("box-%06d", i) }

// FleetTitle is the listing title Fleet's i-th box reports.
func FleetTitle(i int) string { return fmt.Sprintf("Helper number %d", i) }

// Fleet opens a SQLite store in a temporary directory holding n boxes
// as WriteFleet writes them; the caller closes it (brokertest.New, given
// it as its Options.Store, does).
func Fleet(tb testing.TB, n int) *sqlite.Store {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "boxbroker.db")
	WriteFleet(tb, path, n)
	st, err := sqlite.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// WriteFleet makes (or migrates) the SQLite store at path and adds n
// boxes named by FleetName: every box but each seventh has reported a
// declaration (an inference and an egress capability and a published
// listing titled FleetTitle), and each fifth has measured spend this
// month (UTC), i micro-dollars for the i-th.
func WriteFleet(tb testing.TB, path string, n int) {
	tb.Helper()
	st, err := sqlite.Open(path) // makes the schema
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	month := now.Format("2006-01")
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	stmts := map[string]string{
		"box":         `INSERT INTO boxes (name, token_hash, created_at, consent, paused, payer_kind, payer_principal) VALUES (?, ?, ?, 0, 0, 'shared', '')`,
		"declaration": `INSERT INTO declarations (box, doc, at) VALUES (?, ?, ?)`,
		"usage": `INSERT INTO usage (box, month, payer_kind, principal, model, calls, unpriced, unmeasured, input_tokens, output_tokens,
			cache_write_tokens, cache_read_tokens, cost) VALUES (?, ?, 'shared', '', 'claude-sonnet-4-5', 1, 0, 0, 100, 100, 0, 0, ?)`,
	}
	prepared := map[string]*sql.Stmt{}
	for k, q := range stmts {
		if prepared[k], err = tx.Prepare(q); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range n {
		name := FleetName(i)
		if _, err := prepared["box"].Exec(name, fmt.Sprintf("%064x", i), now.UnixMicro()); err != nil {
			tb.Fatal(err)
		}
		if i%7 != 6 {
			doc := fmt.Sprintf(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]},{"name":"egress","broker":"lobby","scope":["GITHUB"]}],`+
				`"listing":{"published":true,"title":%q,"line":"A box of the studio"}}`, FleetTitle(i))
			if _, err := prepared["declaration"].Exec(name, []byte(doc), now.Add(-time.Duration(i)*time.Second).UnixMicro()); err != nil {
				tb.Fatal(err)
			}
		}
		if i%5 == 0 {
			if _, err := prepared["usage"].Exec(name, month, int64(i)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
