package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	file := &fstest.MapFile{Data: []byte("CREATE TABLE t (x int);")}
	tests := []struct {
		name  string
		files []string
		want  string // "" for no error, else part of the error
	}{
		{"in order", []string{"m/0002_b.sql", "m/0001_a.sql"}, ""},
		{"a gap", []string{"m/0001_a.sql", "m/0003_c.sql"}, "without gaps"},
		{"a repeat", []string{"m/0001_a.sql", "m/0001_b.sql"}, "without gaps"},
		{"no version", []string{"m/init.sql"}, "positive version"},
		{"version zero", []string{"m/0000_a.sql"}, "positive version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys[f] = file
			}
			ms, err := Load(fsys, "m/*.sql")
			if tt.want == "" {
				if err != nil || len(ms) != len(tt.files) || ms[0].Version != 1 || ms[0].Name != "0001_a.sql" {
					t.Fatalf("Load = %+v, %v", ms, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestPending(t *testing.T) {
	all := []Migration{{Version: 1}, {Version: 2}, {Version: 3}}
	todo, err := Pending(all, map[int]bool{1: true})
	if err != nil || len(todo) != 2 || todo[0].Version != 2 || todo[1].Version != 3 {
		t.Errorf("Pending(applied 1) = %+v, %v", todo, err)
	}
	if _, err := Pending(all, map[int]bool{1: true, 4: true}); err == nil || !strings.Contains(err.Error(), "version 4") {
		t.Errorf("Pending(applied 4) = %v, want a newer-database error", err)
	}
}
