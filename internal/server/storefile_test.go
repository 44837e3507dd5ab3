package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// TestSQLite_DeletedFileIsNoticed: the SQLite database and its -wal and
// -shm files deleted while serving are noticed within a few seconds with
// no /readyz asked; from then on every box call is refused 503 "cannot
// record", /readyz is 503 naming the file, and one ERROR line says why.
func TestSQLite_DeletedFileIsNoticed(t *testing.T) {
	dir := t.TempDir()
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs, Config: func(c *server.Config) { c.DataDir = dir }})
	b.SetCredential("anthropic", "sk-ant-api03-x")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	hdr := http.Header{"Content-Type": {"application/json"}}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr); r.StatusCode != 200 {
		t.Fatalf("call before the deletion = %d %s, want 200", r.StatusCode, r.Body)
	}
	for _, f := range []string{server.DBFile, server.DBFile + "-wal", server.DBFile + "-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}

	// Noticed on its own, within a few check intervals.
	deleted := time.Now()
	served := 0
	for {
		r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr)
		if r.StatusCode == 503 {
			if _, msg := brokertest.Refusal(r.Body); !strings.Contains(msg, "cannot record") {
				t.Fatalf("call after the deletion = 503 %s, want the message that the broker cannot record", r.Body)
			}
			break
		}
		served++
		if time.Since(deleted) > 6*time.Second {
			t.Fatalf("%d calls answered %d in the 6 s after the database file was deleted; want them refused once it is noticed (checked every 250 ms)", served, r.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("noticed after %s; %d calls answered meanwhile", time.Since(deleted).Round(time.Millisecond), served)
	for i := range 5 {
		if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(messages), hdr); r.StatusCode != 503 {
			t.Errorf("call %d once noticed = %d %s, want 503", i, r.StatusCode, r.Body)
		}
	}
	if r := b.Do("POST", "/api/box/declaration", tok, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`), hdr); r.StatusCode != 503 {
		t.Errorf("report once noticed = %d %s, want 503 (it would be written to the deleted file)", r.StatusCode, r.Body)
	}

	r := b.Do("GET", "/readyz", "", nil, nil)
	var got map[string]any
	_ = json.Unmarshal(r.Body, &got)
	if r.StatusCode != 503 || !strings.Contains(toString(got["store_file"]), "removed or replaced") {
		t.Errorf("/readyz = %d %s, want 503 naming the store's file (store_file)", r.StatusCode, r.Body)
	}
	if n := strings.Count(logs.String(), "the SQLite database file is gone"); n != 1 {
		t.Errorf("log has %d lines saying the database file is gone, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), filepath.Join(dir, server.DBFile)+" was removed") {
		t.Errorf("log does not name %s as removed:\n%s", filepath.Join(dir, server.DBFile), logs.String())
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
