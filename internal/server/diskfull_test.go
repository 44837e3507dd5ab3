package server_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// smallDisk mounts a tmpfs of size bytes under the test's temporary
// directory and returns it, unmounted when the test ends; it skips the
// test where no tmpfs can be mounted (no privilege, no mount(8)).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs for the data directory here (%v: %s); the full disk is simulated by TestCannotRecord_FailsClosed instead",
			err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the disk is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// TestDiskFull_SQLite_FailsClosed: with SQLite's data directory on a
// full filesystem, a call whose audit record can be written neither to
// the store nor to the spool is followed by 503s saying the broker cannot
// record, and /readyz fails; nothing is served unrecorded. The bound
// held: once a record is lost, the next call is refused (checked over up
// to 500 calls, since SQLite's WAL may still have room for some). A run
// whose disk takes all 500 calls' records fails: it tested nothing.
func TestDiskFull_SQLite_FailsClosed(t *testing.T) {
	dir := smallDisk(t, 8<<20)
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.DataDir = dir }})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	hdr := http.Header{"Content-Type": {"application/json"}}
	fill(t, dir)
	served := 0
	for i := range 500 {
		r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr)
		if r.StatusCode == 503 {
			if _, msg := brokertest.Refusal(r.Body); !strings.Contains(msg, "cannot record") {
				t.Fatalf("call %d on a full disk = 503 %s, want the message that the broker cannot record", i, r.Body)
			}
			ready := b.Do("GET", "/readyz", "", nil, nil)
			if ready.StatusCode != 503 {
				t.Errorf("readyz on a full disk = %d %s, want 503", ready.StatusCode, ready.Body)
			}
			t.Logf("full disk: %d calls served before a record was lost (the calls whose records were being written as the disk filled); then 503; readyz %s", served, ready.Body)
			return
		}
		if r.StatusCode != 200 {
			t.Fatalf("call %d on a full disk = %d %s", i, r.StatusCode, r.Body)
		}
		served++
		if err := b.Server.Audit.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// No call was refused, so every record so far went somewhere: to the
	// store, or to the spool. Check it did, then fail: a disk that never
	// filled tested nothing this test names.
	entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "alpha", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < served && b.Server.Spool.Size() == 0 {
		t.Errorf("%d calls served on a full disk, but the store holds %d of their audit entries and the spool nothing: records were lost and no call refused",
			served, len(entries))
	}
	t.Fatalf("the full disk took all %d calls' records (%d audit entries, spool %d bytes): it never filled, so failing closed went untested",
		served, len(entries), b.Server.Spool.Size())
}
