package storetest

import (
	"bytes"
	"io/fs"
	"testing"
	"testing/fstest"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/migrations"
)

// MigrationsUpTo is the migrations of files (migrations/NNNN_what.sql, as
// a store embeds them) up to and including version last: the schema a
// boxbroker before version last+1 made, for a test that fills a database
// so and then opens it with every migration, to see what becomes of its
// rows.
func MigrationsUpTo(t *testing.T, files fs.FS, last int) fs.FS {
	t.Helper()
	ms, err := migrations.Load(files, "migrations/*.sql")
	must(t, "migrations.Load()", err)
	old := fstest.MapFS{}
	for _, m := range ms {
		if m.Version <= last {
			old["migrations/"+m.Name] = &fstest.MapFile{Data: []byte(m.SQL)}
		}
	}
	if len(old) != last {
		t.Fatalf("MigrationsUpTo(%d) found %d migrations", last, len(old))
	}
	return old
}

// OldAdminToken is a row of admin_tokens as a boxbroker before migration
// 0020 (the tokens' role) wrote it: every such token was an operator's.
const OldAdminToken = "INSERT INTO admin_tokens (id, hash, name, created_at) VALUES ('adm-000000000001', 'old-hash', 'before roles', %s)"

// Migration0021 checks that feedback kept before migration 0021 (each
// box's feedback totals) is counted after it, and bound as it was.
// exec runs a statement on a database migrated to 0020, at and words are
// a time and the empty list of words as that database takes them, and
// open opens the store on it, with every migration.
func Migration0021(t *testing.T, exec func(query string, args ...any) error, at, words any, open func() store.Store) {
	t.Helper()
	must(t, "a box before 0021", exec(`INSERT INTO boxes (name, token_hash, created_at, consent, paused, payer_kind, payer_principal)
		VALUES ('alpha', 'h-alpha', $1, $2, $2, 'shared', '')`, at, false))
	for _, size := range []int{10, 20, 30} {
		must(t, "feedback before 0021", exec("INSERT INTO feedback (box, at, words, body) VALUES ('alpha', $1, $2, $3)",
			at, words, bytes.Repeat([]byte("x"), size)))
	}
	s := open()
	ctx := t.Context()
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha) of feedback kept before 0021", store.FeedbackKept{Batches: 3, Bytes: 60})
	a := answer(s.AddFeedback(ctx, store.FeedbackBatch{Box: "alpha", At: time.Now(), Body: []byte("{}")}, "h-alpha", store.FeedbackBound{Batches: 2})).
		must(t, "AddFeedback(alpha) after 0021")
	same(t, "AddFeedback(alpha) bound to 2 batches after 0021", store.FeedbackAdded{ID: a.ID, Dropped: 2, DroppedBytes: 30}, a)
	answer(s.CountFeedback(ctx, "alpha")).is(t, "CountFeedback(alpha) after 0021", store.FeedbackKept{Batches: 2, Bytes: 32})
}
