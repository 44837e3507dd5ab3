package outbox

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/intentius/boxbroker/internal/store"
)

// benchEntry is a typical audit entry of a forwarded call.
var benchEntry = store.AuditEntry{At: time.Now(), Box: "alpha", Method: "POST", Route: "/llm/anthropic/v1/messages",
	Capability: "inference", Words: []string{"agent"}, Status: 200, Duration: time.Millisecond, Bytes: 20, UpstreamStatus: 200}

// BenchmarkJournalAppend is one audit entry journaled, with its share of
// a batch's begin and done (one of each per 16 entries), in each form the
// journal could take:
//
//   - jsonl: the Journal — its encoding and one write(2) a record, a line
//     a batch begun and one done;
//   - sqlite: the same records as rows of a table in a local SQLite file
//     (modernc.org/sqlite, WAL, synchronous=OFF: as safe against a kill
//     as a write(2), since a commit is in the page cache when it returns),
//     one INSERT a record in a transaction of its own, a batch begun an
//     UPDATE naming its key, a batch done a DELETE of its rows.
//
// The Journal keeps the faster, jsonl (see the package's commit log for
// the figures).
func BenchmarkJournalAppend(b *testing.B) {
	b.Run("jsonl", func(b *testing.B) {
		j, err := OpenJournal(b.TempDir(), 0, "", quiet, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer j.Close()
		var seqs []uint64
		b.ReportAllocs()
		for i := range b.N {
			n, err := j.Audit(benchEntry)
			if err != nil {
				b.Fatal(err)
			}
			seqs = append(seqs, n)
			if i%16 == 15 {
				j.Begin("k", seqs)
				j.Done("k")
				seqs = seqs[:0]
			}
		}
	})
	b.Run("sqlite", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "journal.db")
		db, err := sql.Open("sqlite", "file:"+p+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var mode string
		var syncMode int
		if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			b.Fatalf("journal_mode = %q, %v; want wal", mode, err)
		}
		if err := db.QueryRow(`PRAGMA synchronous`).Scan(&syncMode); err != nil || syncMode != 0 {
			b.Fatalf("synchronous = %d, %v; want 0 (OFF)", syncMode, err)
		}
		if _, err := db.Exec(`CREATE TABLE records (n INTEGER PRIMARY KEY, audit BLOB, settle BLOB, batch TEXT)`); err != nil {
			b.Fatal(err)
		}
		ins, err := db.Prepare(`INSERT INTO records (audit) VALUES (?)`)
		if err != nil {
			b.Fatal(err)
		}
		begin, err := db.Prepare(`UPDATE records SET batch = ? WHERE n BETWEEN ? AND ?`)
		if err != nil {
			b.Fatal(err)
		}
		done, err := db.Prepare(`DELETE FROM records WHERE batch = ?`)
		if err != nil {
			b.Fatal(err)
		}
		var first int64
		b.ReportAllocs()
		for i := range b.N {
			body, err := json.Marshal(&benchEntry)
			if err != nil {
				b.Fatal(err)
			}
			res, err := ins.Exec(body)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := res.LastInsertId()
			if i%16 == 0 {
				first = n
			}
			if i%16 == 15 {
				if _, err := begin.Exec("k", first, n); err != nil {
					b.Fatal(err)
				}
				if _, err := done.Exec("k"); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkJournalAppendParallel is BenchmarkJournalAppend's jsonl case
// from many goroutines at once, as a busy broker's calls complete:
// concurrent appends share a write (group commit).
func BenchmarkJournalAppendParallel(b *testing.B) {
	j, err := OpenJournal(b.TempDir(), 0, "", quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var seqs []uint64
		for pb.Next() {
			n, err := j.Audit(benchEntry)
			if err != nil {
				b.Error(err)
				return
			}
			seqs = append(seqs, n)
			if len(seqs) == 16 {
				key := NewKey()
				j.Begin(key, seqs)
				j.Done(key)
				seqs = seqs[:0]
			}
		}
	})
}

// benchSettlement is the settlement of a typical call that reserved
// nothing.
var benchSettlement = store.Settlement{Box: "alpha", Month: "2026-10", Charge: 1200,
	Usage: []store.Usage{{Box: "alpha", Month: "2026-10", PayerKind: "shared", Model: "claude-sonnet-4-5", Calls: 1, InputTokens: 100, OutputTokens: 20, Cost: 1200}}}

// BenchmarkJournalCall is one call's audit entry and settlement
// journaled, with their share of their batches' begins and dones (one of
// each per 16 calls, for each part): "two" as two records, "one" as one
// record holding both (Journal.Call).
func BenchmarkJournalCall(b *testing.B) {
	for _, one := range []bool{false, true} {
		name := "two"
		if one {
			name = "one"
		}
		b.Run(name, func(b *testing.B) {
			j, err := OpenJournal(b.TempDir(), 0, "", quiet, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			var audits, settles []uint64
			b.ReportAllocs()
			for i := range b.N {
				if one {
					n, err := j.Call(&benchEntry, &benchSettlement)
					if err != nil {
						b.Fatal(err)
					}
					audits, settles = append(audits, n), append(settles, n)
				} else {
					na, err := j.Audit(benchEntry)
					if err != nil {
						b.Fatal(err)
					}
					nt, err := j.Call(nil, &benchSettlement)
					if err != nil {
						b.Fatal(err)
					}
					audits, settles = append(audits, na), append(settles, nt)
				}
				if i%16 == 15 {
					j.BeginPart("a", PartAudit, audits)
					j.Done("a")
					j.BeginPart("t", PartSettle, settles)
					j.Done("t")
					audits, settles = audits[:0], settles[:0]
				}
			}
		})
	}
}
