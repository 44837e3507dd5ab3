package storetest

import (
	"io/fs"
	"testing"
	"testing/fstest"

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
	if err != nil {
		t.Fatalf("migrations.Load() = %v", err)
	}
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
