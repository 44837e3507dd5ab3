package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

func measureDo(t *testing.T, method, url, tok, body string) int {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

const measureMessages = `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`

func measureReport(words string) string {
	return `{"capabilities":[{"name":"inference","broker":"lobby","scope":[` + words + `]}]}`
}

// spooled counts the audit entries in dir's spool, by status.
func spooled(t *testing.T, dir string) map[int]int {
	out := map[int]int{}
	b, err := os.ReadFile(filepath.Join(dir, "spool.jsonl"))
	if err != nil {
		return out
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var batch struct {
			Audit []struct{ Status int }
		}
		if json.Unmarshal(line, &batch) == nil {
			for _, e := range batch.Audit {
				out[e.Status]++
			}
		}
	}
	return out
}

// TestMeasure_Issue41DeletedDatabase measures issue 41 item 2 with the
// real binary: the SQLite files deleted while serving, calls made for
// 3 s after, then a restart. BOXBROKER_MEASURE=1 runs it.
func TestMeasure_Issue41DeletedDatabase(t *testing.T) {
	if os.Getenv("BOXBROKER_MEASURE") == "" {
		t.Skip("a measurement: BOXBROKER_MEASURE=1 runs it")
	}
	up := httptest.NewServer(http.HandlerFunc(brokertest.AnthropicStandIn))
	defer up.Close()
	bin, data, env, cli := killableBroker(t)
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-MEASURE", "credential", "set", "anthropic")
	cmd, url, stderr := childServe(t, bin, env, "--anthropic-url", up.URL)
	if url == "" {
		t.Fatalf("serve did not start: %s", stderr)
	}
	if s := measureDo(t, "POST", url+"/api/box/declaration", tok, measureReport(`"agent"`)); s != 200 {
		t.Fatalf("report = %d", s)
	}
	for range 10 {
		measureDo(t, "POST", url+"/llm/anthropic/v1/messages", tok, measureMessages)
	}
	for _, f := range []string{"boxbroker.db", "boxbroker.db-wal", "boxbroker.db-shm"} {
		os.Remove(filepath.Join(data, f))
	}
	statuses := map[int]int{}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(40 * time.Millisecond) {
		statuses[measureDo(t, "POST", url+"/llm/anthropic/v1/messages", tok, measureMessages)]++
	}
	req, _ := http.Get(url + "/readyz")
	ready, _ := io.ReadAll(req.Body)
	req.Body.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	logged := strings.Count(stderr.String(), "database file is gone")
	t.Logf("calls in the 3 s after the deletion, by status: %v", statuses)
	t.Logf("/readyz after: %d %s", req.StatusCode, bytes.TrimSpace(ready))
	t.Logf("log lines saying the database file is gone: %d", logged)
	t.Logf("audit entries in the spool after SIGTERM, by status: %v", spooled(t, data))

	cmd, url, stderr = childServe(t, bin, env, "--anthropic-url", up.URL)
	if url == "" {
		t.Logf("restart: refused: %s", strings.TrimSpace(stderr.String()))
		return
	}
	boxes := cli("", "box", "list")
	t.Logf("restart: served on %s; box list:\n%s", url, boxes)
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
}

// TestMeasure_Issue41TwoServes measures issue 41 item 3 with the real
// binary: a second serve on one SQLite data directory, and whether 20
// reports answered by the first are in force on the second at the next
// request. BOXBROKER_MEASURE=1 runs it.
func TestMeasure_Issue41TwoServes(t *testing.T) {
	if os.Getenv("BOXBROKER_MEASURE") == "" {
		t.Skip("a measurement: BOXBROKER_MEASURE=1 runs it")
	}
	up := httptest.NewServer(http.HandlerFunc(brokertest.AnthropicStandIn))
	defer up.Close()
	bin, _, env, cli := killableBroker(t)
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-MEASURE", "credential", "set", "anthropic")
	one, url1, _ := childServe(t, bin, env, "--anthropic-url", up.URL)
	defer func() { one.Process.Signal(syscall.SIGTERM); one.Wait() }()
	start := time.Now()
	two, url2, stderr := childServe(t, bin, env, "--anthropic-url", up.URL)
	if url2 == "" {
		t.Logf("second serve: stopped after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
		t.Logf("calls the second serve answered: 0")
		return
	}
	defer func() { two.Process.Signal(syscall.SIGTERM); two.Wait() }()
	t.Logf("second serve: started on %s beside the first on %s", url2, url1)
	inForce := 0
	for i := range 20 {
		words, want := `"agent"`, 200 // agent allows a Messages call
		if i%2 == 0 {
			words, want = ``, 403
		}
		if s := measureDo(t, "POST", url1+"/api/box/declaration", tok, measureReport(words)); s != 200 {
			t.Fatalf("report %d to the first = %d", i, s)
		}
		if s := measureDo(t, "POST", url2+"/llm/anthropic/v1/messages", tok, measureMessages); s == want {
			inForce++
		}
	}
	t.Logf("reports answered 200 by the first in force on the second at the next request: %d of 20", inForce)
}
