package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serveOnce runs `serve args...` in-process on the data directory dir
// for at most d, and returns its exit status and stderr: a serve that
// refuses to start returns at once, one that serves returns 0 when d
// ends.
func serveOnce(t *testing.T, dir string, d time.Duration, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb bytes.Buffer
	vars := map[string]string{"BOXBROKER_DATA": dir, "BOXBROKER_LOG_LEVEL": "warn"}
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}
	code := c.main(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"}, args...))
	return code, errb.String()
}

// TestServe_SecondServeOnOneDataDirStops: a second serve on a SQLite
// data directory another serve holds stops at once, naming the process
// that holds it and pointing to PostgreSQL; once the first has stopped,
// a serve there starts.
func TestServe_SecondServeOnOneDataDirStops(t *testing.T) {
	dir := t.TempDir()
	run(t, dir, "", "box", "add", "salad")
	ctx, cancel := context.WithCancel(context.Background())
	first := startServe(t, ctx, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "off")

	start := time.Now()
	code, stderr := serveOnce(t, dir, 5*time.Second)
	if code == 0 {
		t.Fatalf("second serve on %s exited 0 after %s; want it refused at once", dir, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("second serve: exit %d: %s", code, stderr)
	for _, want := range []string{"in use by another boxbroker serve", "process " + strconv.Itoa(os.Getpid()), filepath.Join(dir, "serve.lock"), "PostgreSQL"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("second serve's stderr = %q, want it to say %q", stderr, want)
		}
	}
	// The CLI's own commands still write the store beside serve.
	if _, errs, code := run(t, dir, "", "box", "add", "beside"); code != 0 {
		t.Errorf("box add beside a running serve = %d %q, want 0", code, errs)
	}

	cancel()
	if code := first.wait(t); code != 0 {
		t.Fatalf("first serve exited %d", code)
	}
	if code, stderr := serveOnce(t, dir, 500*time.Millisecond); code != 0 {
		t.Errorf("serve after the first stopped = %d %q, want 0", code, stderr)
	}
}

// TestServe_RefusesDataDirWithKeyButNoDatabase: a data directory whose
// database (and its -wal and -shm) was deleted, while its master key and
// journal remain, is refused, saying how to go on; --new-store makes a
// new one.
func TestServe_RefusesDataDirWithKeyButNoDatabase(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "box", "add", "salad"); code != 0 {
		t.Fatalf("box add = %d %q", code, errs)
	}
	if code, stderr := serveOnce(t, dir, 500*time.Millisecond); code != 0 {
		t.Fatalf("first serve = %d %q, want 0", code, stderr)
	}
	for _, f := range []string{"boxbroker.db", "boxbroker.db-wal", "boxbroker.db-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	code, stderr := serveOnce(t, dir, 5*time.Second)
	if code == 0 {
		t.Fatalf("serve on a data directory with no database exited 0; want it refused")
	}
	t.Logf("serve: exit %d: %s", code, stderr)
	for _, want := range []string{filepath.Join(dir, "boxbroker.db") + " is missing", "master.key", "--new-store"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("serve's stderr = %q, want it to say %q", stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "boxbroker.db")); !os.IsNotExist(err) {
		t.Errorf("refused serve made %s (err %v); want nothing made", filepath.Join(dir, "boxbroker.db"), err)
	}
	// Nor does a command that would make the database.
	if _, errs, code := run(t, dir, "", "box", "add", "other"); code == 0 || !strings.Contains(errs, "--new-store") {
		t.Errorf("box add on a data directory with no database = %d %q, want refused saying --new-store", code, errs)
	}
	if code, stderr := serveOnce(t, dir, 500*time.Millisecond, "--new-store"); code != 0 {
		t.Errorf("serve --new-store = %d %q, want 0", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "boxbroker.db")); err != nil {
		t.Errorf("serve --new-store made no database: %v", err)
	}
}
