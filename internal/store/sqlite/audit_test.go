package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// FuzzAppendWords checks that appendWords writes what encoding/json
// writes, which ListAudit reads back. The words are the input split at
// commas; "-" alone stands for no words.
func FuzzAppendWords(f *testing.F) {
	for _, s := range []string{"-", "", "agent", "agent,decide,web-search", `quote"d,back\slash`, "<b>&</b>",
		"naïve,✓,emoji-🙂", "tab\there,new\nline,\x00,\x7f", "\u2028\u2029", "\xff\xfe,invalid-utf8-\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var words []string
		if s != "-" {
			words = strings.Split(s, ",")
		}
		want := dialect{}.Words(words).(string) // encoding/json's text, nil as []
		if got := appendWords(nil, words); string(got) != string(want) {
			t.Errorf("appendWords(%q) = %s, want %s as encoding/json writes it", words, got, want)
		}
	})
}

func TestAuditChunks(t *testing.T) {
	for n := 0; n <= 3*auditChunk+1; n++ {
		sizes := auditChunks(n)
		sum := 0
		for i, k := range sizes {
			if k < 0 || k > auditChunkLog {
				t.Fatalf("auditChunks(%d) = %v: %d is no statement's size", n, sizes, k)
			}
			if i > 0 && k > sizes[i-1] {
				t.Errorf("auditChunks(%d) = %v, want largest first", n, sizes)
			}
			sum += 1 << k
		}
		if sum != n {
			t.Errorf("auditChunks(%d) = %v, which writes %d rows", n, sizes, sum)
		}
		if n >= auditChunk && sizes[0] != auditChunkLog {
			t.Errorf("auditChunks(%d) = %v, want whole chunks first", n, sizes)
		}
	}
}

// TestAuditCommitsUnsynced checks that audit entries commit at
// synchronous=NORMAL and that every other write, before and after, is at
// FULL: the one write connection is never left relaxed, whether the audit
// write succeeds or fails.
func TestAuditCommitsUnsynced(t *testing.T) {
	s, _ := openTemp(t)
	ctx := context.Background()
	level := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		t.Helper()
		var n int
		if err := q.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := level(s.w); got != 2 {
		t.Fatalf("the write connection's synchronous is %d, want 2 (FULL)", got)
	}
	var inside int
	err := s.writeUnsynced(ctx, "test", func(tx *sql.Tx) ([]store.Change, error) {
		inside = level(tx)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside != 1 {
		t.Errorf("synchronous inside writeUnsynced is %d, want 1 (NORMAL)", inside)
	}
	if got := level(s.w); got != 2 {
		t.Errorf("after writeUnsynced, synchronous is %d, want 2 (FULL)", got)
	}

	e := store.AuditEntry{Box: "b", At: time.Now(), Method: "POST", Route: "/x", Capability: "inference", Status: 200}
	if err := s.AddAudit(ctx, []store.AuditEntry{e, e}); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("failed inside")
	if err := s.writeUnsynced(ctx, "test", func(*sql.Tx) ([]store.Change, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("writeUnsynced with a failing fn = %v, want %v", err, failed)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.AddAudit(cctx, []store.AuditEntry{e}); err == nil {
		t.Error("AddAudit with a canceled context succeeded")
	}
	if got := level(s.w); got != 2 {
		t.Errorf("after the audit writes, synchronous is %d, want 2 (FULL)", got)
	}
	list, err := s.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		t.Errorf("%d audit entries stored, want 2", len(list))
	}
}
