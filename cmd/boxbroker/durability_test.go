package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// TestDurability_KillDuringReportsAndFeedback kills -9 a running broker
// in the middle of a burst of declaration reports and feedback batches;
// after a restart, every report that was answered 200 is there (or a later
// one from the same box), every batch answered 202 is there under the id
// it was answered with, and the store is consistent: SQLite's
// integrity_check is ok and everything it holds lists.
func TestDurability_KillDuringReportsAndFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real broker")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "boxbroker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "data")
	const boxes = 8
	tokens := make([]string, boxes)
	for i := range tokens {
		name := fmt.Sprintf("box-%d", i)
		out, err := exec.Command(bin, "box", "add", "--data", data, name).Output()
		if err != nil {
			t.Fatalf("box add %s: %v %s", name, err, stderrOf(err))
		}
		tokens[i] = strings.TrimSpace(string(out))
		if out, err := exec.Command(bin, "box", "consent", "--data", data, name, "on").CombinedOutput(); err != nil {
			t.Fatalf("box consent %s on: %v %s", name, err, out)
		}
	}
	// Each serve binds only port 0 (no admin API), so a broker the
	// developer runs on the default ports is no matter; its stderr is
	// shown when the test fails.
	env := append(os.Environ(), "BOXBROKER_MASTER_KEY=", "BOXBROKER_STORE=")
	start := func() (*exec.Cmd, string) { return serveChild(t, bin, env, "--data", data, "--log-level", "error") }
	cmd, url := start()

	var mu sync.Mutex
	acked := make([]int, boxes)                // last report n answered 200, per box
	batches := make([]map[string]int64, boxes) // batch body → id, for every batch answered 202
	for i := range batches {
		batches[i] = map[string]int64{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	progress := make(chan struct{}, 1) // a report or batch was acknowledged
	acknowledged := func() {
		select {
		case progress <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < boxes; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			post := func(path, body string) (int, []byte, bool) {
				req, _ := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokens[i])
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0, nil, false // the broker died
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp.StatusCode, b, err == nil
			}
			for n := 1; ctx.Err() == nil; n++ {
				body := fmt.Sprintf(`{"capabilities":[{"name":"feedback","broker":"lobby","scope":["agent","passive"]}],"listing":{"title":"n=%d","line":"x"}}`, n)
				status, _, ok := post("/api/box/declaration", body)
				if !ok {
					return
				}
				if status == 200 {
					mu.Lock()
					acked[i] = n
					mu.Unlock()
					acknowledged()
				}
				for k := 0; k < 3; k++ {
					batch := fmt.Sprintf(`{"entries":[{"note":"box-%d batch %d.%d"}],"counts":{"n":%d}}`, i, n, k, n)
					status, answer, ok := post("/api/feedback", batch)
					if !ok {
						return
					}
					if status != 202 {
						continue
					}
					var a struct{ ID int64 }
					if err := json.Unmarshal(answer, &a); err != nil || a.ID == 0 {
						t.Errorf("a batch was answered 202 %s", answer)
						continue
					}
					mu.Lock()
					batches[i][batch] = a.ID
					mu.Unlock()
					acknowledged()
				}
			}
		}(i)
	}
	// Kill it mid-burst: once some of each are acknowledged (however
	// loaded the machine), and then once more have been, so that writes
	// are under way. Each acknowledgement is the signal; nothing sleeps.
	counts := func() (reports, kept int) {
		mu.Lock()
		defer mu.Unlock()
		for i := range acked {
			reports += acked[i]
			kept += len(batches[i])
		}
		return reports, kept
	}
	timeout := time.After(60 * time.Second)
	for _, want := range []struct{ reports, kept int }{{boxes, 2 * boxes}, {3 * boxes, 6 * boxes}} {
		for r, k := counts(); r < want.reports || k < want.kept; r, k = counts() {
			select {
			case <-progress:
			case <-timeout:
				t.Fatalf("after 60s, %d reports and %d batches acknowledged; want %d and %d before the kill", r, k, want.reports, want.kept)
			}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cancel()
	wg.Wait()

	cmd, _ = start() // a restart recovers the WAL
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	cfg := server.Config{DataDir: data}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reports, kept := 0, 0
	for i := 0; i < boxes; i++ {
		name := fmt.Sprintf("box-%d", i)
		reports += acked[i]
		kept += len(batches[i])
		if acked[i] > 0 {
			doc, _, err := st.Declaration(context.Background(), name)
			if err != nil {
				t.Errorf("%s: acknowledged report %d, store has none: %v", name, acked[i], err)
			} else {
				var d struct {
					Listing struct{ Title string } `json:"listing"`
				}
				json.Unmarshal(doc, &d)
				var got int
				fmt.Sscanf(d.Listing.Title, "n=%d", &got)
				if got < acked[i] {
					t.Errorf("%s: acknowledged report %d, store has %d", name, acked[i], got)
				}
			}
		}
		stored, _, err := st.ListFeedback(context.Background(), store.FeedbackQuery{Box: name, Limit: store.MaxFeedbackPage})
		if err != nil {
			t.Fatalf("ListFeedback(%s) after the restart: %v", name, err)
		}
		byID := map[int64]string{}
		for _, f := range stored {
			byID[f.ID] = string(f.Body)
		}
		for body, id := range batches[i] {
			if byID[id] != body {
				t.Errorf("%s: batch %d was answered 202, store has %q under its id", name, id, byID[id])
			}
		}
	}
	if reports == 0 || kept == 0 {
		t.Fatalf("%d reports and %d batches acknowledged before the kill; want some of each", reports, kept)
	}
	checkConsistent(t, st, filepath.Join(data, server.DBFile))
	t.Logf("%d reports and %d feedback batches acknowledged before kill -9; all there after restart, store consistent", reports, kept)
	_ = os.Remove(bin)
}

// checkConsistent checks a store after a crash: SQLite's own
// integrity_check is ok, and everything the store holds lists.
func checkConsistent(t *testing.T, st store.Store, file string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var result string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&result); err != nil || result != "ok" {
		t.Errorf("PRAGMA integrity_check = %q, %v; want ok", result, err)
	}
	ctx := context.Background()
	boxes, err := st.ListBoxes(ctx)
	if err != nil || len(boxes) == 0 {
		t.Fatalf("ListBoxes = %d, %v", len(boxes), err)
	}
	for _, b := range boxes {
		if _, _, err := st.Declaration(ctx, b.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Declaration(%s) = %v", b.Name, err)
		}
		if _, _, err := st.ListFeedback(ctx, store.FeedbackQuery{Box: b.Name, Limit: 1}); err != nil {
			t.Errorf("ListFeedback(%s) = %v", b.Name, err)
		}
		if _, err := st.ListSecrets(ctx, b.Name); err != nil {
			t.Errorf("ListSecrets(%s) = %v", b.Name, err)
		}
		if _, err := st.ListResources(ctx, b.Name); err != nil {
			t.Errorf("ListResources(%s) = %v", b.Name, err)
		}
		if _, err := st.ListGrants(ctx, b.Name); err != nil {
			t.Errorf("ListGrants(%s) = %v", b.Name, err)
		}
	}
	if _, err := st.ListCredentials(ctx); err != nil {
		t.Errorf("ListCredentials = %v", err)
	}
	if _, err := st.ChangesSince(ctx, 0, 1<<20); err != nil {
		t.Errorf("ChangesSince(0) = %v", err)
	}
}

// stderrOf is the stderr an exec.Cmd.Output error carries, if any.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// killableBroker builds boxbroker into a temporary directory for a test
// that runs it as a child and kills it: the binary, its data directory,
// the environment that points every command there (no master key or
// store from the developer's own), and cli, which runs one subcommand
// with stdin and returns its stdout, failing the test with its stderr.
func killableBroker(t *testing.T) (bin, data string, env []string, cli func(stdin string, args ...string) string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "boxbroker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data = filepath.Join(dir, "data")
	env = append(os.Environ(), "BOXBROKER_MASTER_KEY=", "BOXBROKER_STORE=", "BOXBROKER_DATA="+data)
	cli = func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v %s", args, err, stderrOf(err))
		}
		return strings.TrimSpace(string(out))
	}
	return bin, data, env, cli
}

// serveChild starts `bin serve` on port 0 with no admin listener and
// args after, with env, and returns the process and the URL it printed.
// Its stderr is shown if the test fails; a serve that stops before it
// listens fails the test.
func serveChild(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd, url, stderr := childServe(t, bin, env, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stderr of %v:\n%s", cmd.Args[1:], stderr.String())
		}
	})
	if url == "" {
		t.Fatalf("serve stopped before it listened")
	}
	return cmd, url
}

// childServe starts `bin serve` on port 0 with no admin listener and
// args after, with env, and returns the process, the URL it printed (""
// when it printed none: it stopped) and its stderr, readable once it
// has stopped.
func childServe(t *testing.T, bin string, env []string, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--log-level", "warn"}, args...)...)
	cmd.Env = env
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Wait()
		return cmd, "", stderr
	}
	_, url, _ := strings.Cut(strings.TrimSpace(line), "listening on ")
	go io.Copy(io.Discard, stdout)
	return cmd, url, stderr
}
