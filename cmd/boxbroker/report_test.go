package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// runWith runs the CLI in-process with stdin and exactly the environment env.
func runWith(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	code = c.main(context.Background(), args)
	return out.String(), errb.String(), code
}

// sampleFile writes the document testdata/name holds under "sample" to a
// file, as chant would have printed it, and returns its path.
func sampleFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Sample json.RawMessage `json:"sample"`
	}
	if err := json.Unmarshal(b, &f); err != nil || len(f.Sample) == 0 {
		t.Fatalf("%s: no sample (%v)", name, err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, f.Sample, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func stewardWant(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "declaration-reports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name string         `json:"name"`
			Want map[string]any `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	for _, c := range file.Cases {
		if strings.HasPrefix(c.Name, "the report a steward makes") {
			delete(c.Want, "status")
			return c.Want
		}
	}
	t.Fatal("no steward case")
	return nil
}

func TestReport_PostsTheStewardsReport(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("salad")
	status := sampleFile(t, "workspace-status.sample.json")
	runs := sampleFile(t, "workspace-runs.sample.json")
	args := []string{"report", "--status", status, "--box", "salad", "--runs", runs, "--month", "2026-10"}
	tests := []struct {
		name  string
		env   map[string]string
		stdin string
		args  []string
	}{
		{"token from the environment", map[string]string{"BOXBROKER_URL": b.URL, "BOXBROKER_TOKEN": token}, "", args},
		{"token from stdin", map[string]string{"BOXBROKER_URL": b.URL}, token + "\n", args},
		{"STUDIO_URL", map[string]string{"STUDIO_URL": b.URL, "BOXBROKER_TOKEN": token}, "", args},
		{"--url", map[string]string{"BOXBROKER_TOKEN": token}, "", append(append([]string(nil), args...), "--url", b.URL)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runWith(t, tt.env, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("report = %d, stderr %q", code, errs)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("report printed %q: %v", out, err)
			}
			if _, ok := got["at"].(string); !ok {
				t.Errorf("kept has no at: %s", out)
			}
			delete(got, "at")
			delete(got, "payer")
			if want := stewardWant(t); !reflect.DeepEqual(got, want) {
				t.Errorf("report printed %s, want what the vector keeps: %v", out, want)
			}
			if strings.Contains(out+errs, token) {
				t.Errorf("report printed the token")
			}
		})
	}
}

func TestReport_Refusals(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("salad")
	status := sampleFile(t, "workspace-status.sample.json")
	statusDoc, _ := os.ReadFile(status)
	failure := filepath.Join(t.TempDir(), "runs-failure.json")
	_ = os.WriteFile(failure, []byte(`{"contract":1,"error":{"code":"not-a-git-repository","message":"this directory is not in a git repository"}}`), 0o600)
	env := map[string]string{"BOXBROKER_URL": b.URL, "BOXBROKER_TOKEN": token}
	tests := []struct {
		name     string
		env      map[string]string
		stdin    string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"status and token both on stdin", map[string]string{"BOXBROKER_URL": b.URL}, string(statusDoc), []string{"report", "--box", "salad"}, 2, "cannot both come from stdin"},
		{"token as an argument", env, "", []string{"report", "--status", status, token}, 2, "never an argument"},
		{"no URL", map[string]string{"BOXBROKER_TOKEN": token}, "", []string{"report", "--status", status, "--box", "salad"}, 2, "no broker URL"},
		{"a month that is not YYYY-MM", env, "", []string{"report", "--status", status, "--box", "salad", "--runs", status, "--month", "2026"}, 2, "YYYY-MM"},
		{"unknown token", map[string]string{"BOXBROKER_URL": b.URL, "BOXBROKER_TOKEN": "bbx_unknown"}, "", []string{"report", "--status", status, "--box", "salad"}, 1, "the broker answered 40"},
		{"several boxes", env, "", []string{"report", "--status", status}, 1, "several boxes"},
		{"no such file", env, "", []string{"report", "--status", "/nonexistent/status.json"}, 1, "read the status document"},
		{"status on stdin, empty", map[string]string{"BOXBROKER_URL": b.URL, "BOXBROKER_TOKEN": token}, "", []string{"report"}, 1, "status document is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := runWith(t, tt.env, tt.stdin, tt.args...)
			if code != tt.wantCode || !strings.Contains(errs, tt.wantErr) {
				t.Errorf("report %v = %d %q, want %d naming %q", tt.args[1:], code, errs, tt.wantCode, tt.wantErr)
			}
			if strings.Contains(out+errs, token) {
				t.Errorf("report printed the token")
			}
		})
	}

	t.Run("a runs failure document: no spend, said on stderr", func(t *testing.T) {
		out, errs, code := runWith(t, env, "", "report", "--status", status, "--box", "salad", "--runs", failure)
		if code != 0 || !strings.Contains(errs, "this directory is not in a git repository") || strings.Contains(out, `"spend"`) {
			t.Errorf("report with a failed runs document = %d, stdout %q, stderr %q", code, out, errs)
		}
	})
}

func TestReport_DryRun(t *testing.T) {
	status := sampleFile(t, "workspace-status.sample.json")
	runs := sampleFile(t, "workspace-runs.sample.json")
	statusDoc, _ := os.ReadFile(status)
	out, errs, code := runWith(t, nil, string(statusDoc), "report", "--dry-run", "--box", "notes", "--runs", runs, "--month", "2026-09")
	if code != 0 {
		t.Fatalf("report --dry-run = %d %q", code, errs)
	}
	var got struct {
		Capabilities []struct{ Name, Broker string }
		Listing      struct{ Title string }
		Spend        struct {
			Month string
			USD   float64
			Runs  int
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("dry run printed %q: %v", out, err)
	}
	if len(got.Capabilities) != 3 || got.Capabilities[1].Broker != "fountain" || got.Listing.Title != "Notes" ||
		got.Spend.Month != "2026-09" || got.Spend.USD != 4.6536 || got.Spend.Runs != 4 {
		t.Errorf("report --dry-run printed %s", out)
	}
}

// TestReport_HelpSaysWhereTheTokenComesFrom: report -h tells the box's
// steward the token is read from BOXBROKER_TOKEN or stdin, as it is.
func TestReport_HelpSaysWhereTheTokenComesFrom(t *testing.T) {
	_, errs, _ := runWith(t, nil, "", "report", "-h")
	for _, want := range []string{"BOXBROKER_TOKEN", "stdin", "never from arguments"} {
		if !strings.Contains(errs, want) {
			t.Errorf("report -h = %q, want %q in it", errs, want)
		}
	}
}

// TestReport_HostileBrokerRefusalIsShownSafely: a BOXBROKER_URL that is
// not a broker answers the report with a refusal whose message holds
// terminal escapes (a screen clear, an OSC 52 clipboard write) and runs
// to half a MiB. The CLI prints at most a few KiB of it, saying it is cut,
// with every control character escaped: no escape reaches the terminal.
func TestReport_HostileBrokerRefusalIsShownSafely(t *testing.T) {
	msg := "\x1b[2J\x1b]52;c;ZWNobyBwd25lZA==\x07" + strings.Repeat("x", 512<<10)
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": "permission_error", "message": msg}})
	}))
	t.Cleanup(hostile.Close)
	env := map[string]string{"BOXBROKER_URL": hostile.URL, "BOXBROKER_TOKEN": "bbx_" + strings.Repeat("a", 43)}
	_, errs, code := runWith(t, env, "", "report", "--status", sampleFile(t, "workspace-status.sample.json"), "--box", "salad")
	if code != 1 || len(errs) > 8<<10 || !strings.Contains(errs, "[cut: the message is") {
		t.Fatalf("report against a hostile URL = %d, %d bytes on stderr (%.200q), want 1 and at most 8 KiB saying it is cut", code, len(errs), errs)
	}
	if strings.ContainsAny(errs[:len(errs)-1], "\x1b\x07") || !strings.Contains(errs, `\x1b[2J`) {
		t.Errorf("stderr = %.200q, want every control character escaped", errs)
	}
}
