package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/store/sqlite/sqlitetest"
)

// fleetDir is a data directory holding n boxes (sqlitetest.WriteFleet).
func fleetDir(tb testing.TB, n int) string {
	tb.Helper()
	dir := tb.TempDir()
	sqlitetest.WriteFleet(tb, filepath.Join(dir, server.DBFile), n)
	return dir
}

// listedNames checks box list's output: the header once, then one line
// a box; it returns the names in order.
func listedNames(t *testing.T, out string) []string {
	t.Helper()
	var names []string
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Fields(line)
		if i == 0 {
			if len(f) == 0 || f[0] != "NAME" {
				t.Fatalf("box list's first line = %q, want the header", line)
			}
			continue
		}
		if len(f) < 7 {
			t.Fatalf("box list line %d = %q, want 7 columns", i, line)
		}
		names = append(names, f[0])
	}
	return names
}

// TestBoxList_PagesThroughBothBackends: box list prints every box of a
// fleet larger than its page (1,201 boxes, pages of 500), once each, by
// name, reading the store directly and through the admin API.
func TestBoxList_PagesThroughBothBackends(t *testing.T) {
	const n = 2*boxListPage + 201
	dir := fleetDir(t, n)
	code, out, errs := runEnv(t, map[string]string{"BOXBROKER_DATA": dir}, "", "box", "list")
	if code != 0 {
		t.Fatalf("box list --data = %d %s", code, errs)
	}
	local := listedNames(t, out)

	st, err := sqlite.Open(filepath.Join(dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokertest.Options{Store: st})
	code, out, errs = runEnv(t, map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken}, "", "box", "list")
	if code != 0 {
		t.Fatalf("box list --admin-url = %d %s", code, errs)
	}
	remote := listedNames(t, out)
	for what, names := range map[string][]string{"--data": local, "--admin-url": remote} {
		if len(names) != n {
			t.Errorf("box list %s = %d boxes, want %d", what, len(names), n)
			continue
		}
		for i, name := range names {
			if want := sqlitetest.FleetName(i); name != want {
				t.Errorf("box list %s line %d = %s, want %s", what, i+1, name, want)
				break
			}
		}
	}
	if !strings.Contains(out, "never") || strings.Count(out, "NAME") != 1 {
		t.Errorf("box list --admin-url shows no never-reported box, or the header more than once")
	}
}

// peakHeap runs fn and returns the most heap it saw in use above what was
// in use before, sampling every millisecond.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak uint64
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			mu.Lock()
			peak = max(peak, s[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// lineCounter counts the lines written to it, keeping none.
type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// TestBoxList_HundredThousandBoxesInBoundedMemory lists 100,000 boxes
// (BOXBROKER_TEST_FLEET, default 100000; set it to run this test) through
// both backends and checks the heap the listing adds stays under 48 MiB
// whatever the fleet's size: box list keeps a page, not the fleet.
func TestBoxList_HundredThousandBoxesInBoundedMemory(t *testing.T) {
	v := os.Getenv("BOXBROKER_TEST_FLEET")
	if v == "" {
		t.Skip("set BOXBROKER_TEST_FLEET=100000 to list that many boxes (about a minute)")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		n = 100000
	}
	const bound = 48 << 20
	dir := fleetDir(t, n)
	st, err := sqlite.Open(filepath.Join(dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokertest.Options{Store: st})
	backends := []struct {
		name string
		env  map[string]string
	}{
		{"--data", map[string]string{"BOXBROKER_DATA": dir}},
		{"--admin-url", map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken}},
	}
	for _, tt := range backends {
		t.Run(tt.name, func(t *testing.T) {
			out := &lineCounter{}
			var errb bytes.Buffer
			code := -1
			start := time.Now()
			peak := peakHeap(func() {
				c := &cli{stdin: strings.NewReader(""), stdout: bufio.NewWriter(io.Writer(out)), stderr: &errb, getenv: func(k string) string { return tt.env[k] }}
				code = c.main(context.Background(), []string{"box", "list"})
				c.stdout.(*bufio.Writer).Flush()
			})
			t.Logf("box list %s of %d boxes: %d lines in %v, heap peak +%.1f MiB", tt.name, n, out.n, time.Since(start).Round(time.Millisecond), float64(peak)/(1<<20))
			if code != 0 || out.n != n+1 {
				t.Fatalf("box list %s = %d, %d lines (%s), want 0, %d", tt.name, code, out.n, errb.String(), n+1)
			}
			if peak > bound {
				t.Errorf("box list %s of %d boxes took the heap up %.1f MiB, want under %d MiB", tt.name, n, float64(peak)/(1<<20), bound>>20)
			}
		})
	}
}
