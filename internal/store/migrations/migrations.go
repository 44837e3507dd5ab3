// Package migrations reads a store's versioned schema files and decides
// which of them a database still needs. Each store applies them in its own
// dialect, inside one transaction, recording each version in its
// schema_migrations table.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema version and the SQL that makes it.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations matching pattern in fsys (files named
// NNNN_what.sql), in version order. It fails when a name does not start
// with a positive version, or the versions do not run 1, 2, ... without
// gaps or repeats.
func Load(fsys fs.FS, pattern string) ([]Migration, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names {
		base := path.Base(name)
		prefix, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name does not start with a positive version", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s has version %d, want %d: versions run 1, 2, ... without gaps or repeats", m.Name, m.Version, i+1)
		}
	}
	return ms, nil
}

// Pending returns the migrations of all that applied does not hold, in
// order. A database holding a version all does not know is refused: it
// was made by a newer boxbroker.
func Pending(all []Migration, applied map[int]bool) ([]Migration, error) {
	known := map[int]bool{}
	for _, m := range all {
		known[m.Version] = true
	}
	for v := range applied {
		if !known[v] {
			return nil, fmt.Errorf("migrate: database has schema version %d, which this boxbroker does not know (is it newer?)", v)
		}
	}
	var todo []Migration
	for _, m := range all {
		if !applied[m.Version] {
			todo = append(todo, m)
		}
	}
	return todo, nil
}
