package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestBoxConsent_ReachesARunningBroker: consent set by the command, in
// the running broker's data directory, decides the broker's next answer.
func TestBoxConsent_ReachesARunningBroker(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	data := br.Server.Config.DataDir
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	batch := []byte(`{"entries":[{"note":"n"}]}`)
	if resp := br.Do("POST", "/api/feedback", tok, batch, nil); resp.StatusCode != 403 {
		t.Fatalf("POST /api/feedback before consent = %d, want 403", resp.StatusCode)
	}
	if out, errs, code := run(t, data, "", "box", "consent", "alpha", "on"); code != 0 || !strings.Contains(out, "consent on") {
		t.Fatalf("box consent alpha on = %d %q %q", code, out, errs)
	}
	br.Sync()
	if resp := br.Do("POST", "/api/feedback", tok, batch, nil); resp.StatusCode != 202 {
		t.Fatalf("POST /api/feedback after consent = %d %s, want 202", resp.StatusCode, resp.Body)
	}
	if out, _, code := run(t, data, "", "box", "consent", "alpha"); code != 0 || !strings.Contains(out, "consent on") {
		t.Errorf("box consent alpha = %d %q, want it to say on", code, out)
	}
	run(t, data, "", "box", "consent", "alpha", "off")
	br.Sync()
	if resp := br.Do("POST", "/api/feedback", tok, batch, nil); resp.StatusCode != 403 {
		t.Fatalf("POST /api/feedback after consent off = %d, want 403", resp.StatusCode)
	}
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"box", "consent", "alpha", "maybe"}, 2},
		{[]string{"box", "consent"}, 2},
		{[]string{"box", "consent", "Not-A-Name", "on"}, 2},
		{[]string{"box", "consent", "nobody", "on"}, 1},
	}
	for _, tt := range tests {
		if _, _, code := run(t, data, "", tt.args...); code != tt.want {
			t.Errorf("boxbroker %q = %d, want %d", tt.args, code, tt.want)
		}
	}
}

func TestFeedbackExport(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	data := br.Server.Config.DataDir
	tok := br.AddBox("alpha")
	br.AddBox("beta")
	br.Report(tok, brokertest.Entry("feedback", "agent", "passive"))
	run(t, data, "", "box", "consent", "alpha", "on")
	br.Sync()
	bodies := []string{
		"{\"entries\":[{\"note\":\"<b>tags</b> & \\u2028 lines\"}],\n \"counts\":{\"a\":1}}",
		`{"counts":{"restarts":2}}`,
	}
	for _, b := range bodies {
		if resp := br.Do("POST", "/api/feedback", tok, []byte(b), nil); resp.StatusCode != 202 {
			t.Fatalf("POST /api/feedback = %d %s", resp.StatusCode, resp.Body)
		}
	}
	out, errs, code := run(t, data, "", "feedback", "export", "alpha")
	if code != 0 {
		t.Fatalf("feedback export alpha = %d %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(bodies) {
		t.Fatalf("feedback export alpha printed %d lines, want %d:\n%s", len(lines), len(bodies), out)
	}
	wantWords := [][]string{{"agent", "passive"}, {"passive"}}
	var lastID int64
	for i, line := range lines {
		var got struct {
			ID    int64           `json:"id"`
			Box   string          `json:"box"`
			At    time.Time       `json:"at"`
			Words []string        `json:"words"`
			Batch json.RawMessage `json:"batch"`
		}
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d %q is not JSON: %v", i, line, err)
		}
		var want, have any
		_ = json.Unmarshal([]byte(bodies[i]), &want)
		_ = json.Unmarshal(got.Batch, &have)
		wb, _ := json.Marshal(want)
		hb, _ := json.Marshal(have)
		if got.Box != "alpha" || got.At.IsZero() || got.ID <= lastID || strings.Join(got.Words, ",") != strings.Join(wantWords[i], ",") || !bytes.Equal(wb, hb) {
			t.Errorf("line %d = %s, want batch %s of alpha with words %q", i, line, bodies[i], wantWords[i])
		}
		lastID = got.ID
	}
	// --after gives only what is newer.
	if out, _, _ := run(t, data, "", "feedback", "export", "--after", "1", "alpha"); strings.Count(out, "\n") != 1 || !strings.Contains(out, "restarts") {
		t.Errorf("feedback export --after 1 alpha = %q, want the second batch only", out)
	}
	if out, _, code := run(t, data, "", "feedback", "list", "alpha"); code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, `"entries":1,"counts":1`) {
		t.Errorf("feedback list alpha = %d %q, want two summary lines", code, out)
	}
	if out, _, code := run(t, data, "", "feedback", "export", "beta"); code != 0 || out != "" {
		t.Errorf("feedback export beta = %d %q, want nothing", code, out)
	}
	if _, _, code := run(t, data, "", "feedback", "export", "nobody"); code != 1 {
		t.Errorf("feedback export nobody = %d, want 1", code)
	}
}

func TestBoxAssign(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{Fountain: true})
	br.SetCredential("fountain", "fk_key")
	data := br.Server.Config.DataDir
	alpha := br.AddBox("alpha")
	br.AddBox("beta")
	br.Report(alpha, brokertest.Entry("fountain", "sandboxes"))
	if resp := br.Do("GET", "/fountain/api/sandboxes/sb1", alpha, nil, nil); resp.StatusCode != 403 {
		t.Fatalf("GET an unassigned sandbox = %d, want 403", resp.StatusCode)
	}
	if out, errs, code := run(t, data, "", "box", "assign", "alpha", "sandbox", "sb1"); code != 0 {
		t.Fatalf("box assign alpha sandbox sb1 = %d %q %q", code, out, errs)
	}
	if resp := br.Do("GET", "/fountain/api/sandboxes/sb1", alpha, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("GET an assigned sandbox = %d %s, want 200", resp.StatusCode, resp.Body)
	}
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"box", "assign", "beta", "sandbox", "sb1"}, 1},
		{[]string{"box", "unassign", "beta", "sandbox", "sb1"}, 1},
		{[]string{"box", "assign", "alpha", "agent", "x"}, 2},
		{[]string{"box", "assign", "alpha", "vault", "a/b"}, 2},
		{[]string{"box", "assign", "alpha", "vault", ".."}, 2},
		{[]string{"box", "assign", "alpha", "vault"}, 2},
		{[]string{"box", "assign", "nobody", "vault", "v1"}, 1},
		{[]string{"box", "assign", "alpha", "sandbox", "sb1"}, 0},
	}
	for _, tt := range tests {
		if _, _, code := run(t, data, "", tt.args...); code != tt.want {
			t.Errorf("boxbroker %q = %d, want %d", tt.args, code, tt.want)
		}
	}
	if out, _, _ := run(t, data, "", "box", "resources", "alpha"); !strings.Contains(out, "sandbox") || !strings.Contains(out, "sb1") {
		t.Errorf("box resources alpha = %q, want sandbox sb1", out)
	}
	if _, errs, code := run(t, data, "", "box", "unassign", "alpha", "sandbox", "sb1"); code != 0 {
		t.Fatalf("box unassign alpha sandbox sb1 = %d %q", code, errs)
	}
	if _, err := br.Server.Store.ResourceOwner(context.Background(), store.ResourceSandbox, "sb1"); err == nil {
		t.Errorf("sb1 still recorded after unassign")
	}
	if resp := br.Do("GET", "/fountain/api/sandboxes/sb1", alpha, nil, nil); resp.StatusCode != 403 {
		t.Errorf("GET an unassigned sandbox = %d, want 403", resp.StatusCode)
	}
}

// TestFeedbackExport_MoreThanAPage: export and list read the store a
// page at a time and print every batch once, oldest first, however many
// pages the box's batches fill; --after starts inside any page.
func TestFeedbackExport_MoreThanAPage(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	data := br.Server.Config.DataDir
	toks := map[string]string{"alpha": br.AddBox("alpha"), "beta": br.AddBox("beta")}
	const n = 2*feedbackPage + 50
	var ids []int64
	for i := range n {
		for _, box := range []string{"alpha", "beta"} {
			added, err := br.Server.Store.AddFeedback(context.Background(), store.FeedbackBatch{Box: box, At: time.Now(), Words: []string{"agent"},
				Body: []byte(`{"entries":[` + strconv.Itoa(i) + `]}`)}, token.Hash(toks[box]), store.FeedbackBound{})
			if err != nil {
				t.Fatal(err)
			}
			if box == "alpha" {
				ids = append(ids, added.ID)
			}
		}
	}
	tests := []struct {
		args []string
		want []int64
	}{
		{[]string{"feedback", "export", "alpha"}, ids},
		{[]string{"feedback", "list", "alpha"}, ids},
		{[]string{"feedback", "export", "--after", strconv.FormatInt(ids[feedbackPage+7], 10), "alpha"}, ids[feedbackPage+8:]},
	}
	for _, tt := range tests {
		out, errs, code := run(t, data, "", tt.args...)
		if code != 0 {
			t.Fatalf("boxbroker %q = %d %q", tt.args, code, errs)
		}
		var got []int64
		for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var l struct {
				ID  int64  `json:"id"`
				Box string `json:"box"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Box != "alpha" {
				t.Fatalf("boxbroker %q line %d = %q, want a batch of alpha", tt.args, i, line)
			}
			got = append(got, l.ID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("boxbroker %q printed %d batches, want alpha's %d, oldest first, each once", tt.args, len(got), len(tt.want))
		}
	}
}
