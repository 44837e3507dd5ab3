package auditsink_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// TestBroker_AuditStreamedAcrossRestart drives box calls — a model call
// with the shared credential, an egress call with a secret, a refused
// token — through a broker whose audit sink refuses every POST, stops
// the broker, starts another on the same data directory with the sink
// taking POSTs, and checks that every audit row the store holds reached
// the sink, in order per replica with none missing, and that no token,
// credential or secret value is in any byte the sink received.
func TestBroker_AuditStreamedAcrossRestart(t *testing.T) {
	const (
		credential = "sk-ant-api03-SINKCANARY-CREDENTIAL-a41e"
		secretVal  = "sv-SINKCANARY-SECRET-77b2"
	)
	rc, u := newReceiver(t, 1<<30)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"echo":"`+r.Header.Get("Authorization")+`"}`)
	}))
	t.Cleanup(echo.Close)
	dir := t.TempDir()
	opts := brokertest.Options{Config: func(c *server.Config) {
		c.DataDir = dir
		c.AuditSinkURL = u
	}}
	var tok string
	calls := func(b *brokertest.Broker) {
		t.Helper()
		for _, c := range []struct {
			method, path, body string
			header             http.Header
			status             int
		}{
			{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {tok}}, 200},
			{"GET", "/egress/CANARY/v1/x?q=" + secretVal, ``, http.Header{"Authorization": {"Bearer " + tok}}, 200},
			{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, http.Header{"X-Api-Key": {tok + "x"}}, 403},
		} {
			if r := b.Do(c.method, c.path, tok, []byte(c.body), c.header); r.StatusCode != c.status {
				t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, r.StatusCode, r.Body, c.status)
			}
		}
	}
	t.Run("sink down", func(t *testing.T) {
		b := brokertest.New(t, opts)
		tok = b.AddBox("alpha")
		b.SetCredential(payer.SharedAnthropic, credential)
		b.SetSecret("alpha", "CANARY", echo.URL, secretVal)
		b.Sync()
		b.Report(tok, brokertest.Entry("inference", "agent"), brokertest.Entry("egress", "CANARY"))
		calls(b)
	}) // the broker stops here, its rows unsent
	rc.mu.Lock()
	if len(rc.rows) != 0 {
		t.Fatalf("the sink took %d rows while refusing", len(rc.rows))
	}
	rc.fail = 0
	rc.mu.Unlock()
	var kept []store.AuditEntry
	var rows []auditsink.Row
	t.Run("sink up", func(t *testing.T) {
		b := brokertest.New(t, opts)
		calls(b)
		// An operator's action through the admin API is in the stream
		// too, beside the box calls.
		if r := b.Admin("POST", "/api/boxes", b.AdminToken, map[string]any{"name": "sinkadmin"}); r.StatusCode != http.StatusCreated && r.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/boxes = %d %s", r.StatusCode, r.Body)
		}
		if err := b.Server.Audit.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		var err error
		kept, err = b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		rows = rc.waitRows(t, len(kept))
	})
	if len(kept) < 6 {
		t.Fatalf("the store kept %d audit rows, want at least 6", len(kept))
	}
	// At least once: a repeat is a row of a seq already seen; with the
	// repeats left out, the seqs run 1, 2, 3... with none missing.
	var next uint64 = 1
	var uniq int
	for _, r := range rows {
		if r.Replica != rows[0].Replica {
			t.Fatalf("rows of two replicas: %s, %s", rows[0].Replica, r.Replica)
		}
		switch {
		case r.Seq == next:
			next++
			uniq++
		case r.Seq > next:
			t.Fatalf("row seq %d arrived before %d", r.Seq, next)
		}
	}
	var admin bool
	for _, r := range rows {
		admin = admin || r.Box == "sinkadmin"
	}
	if !admin {
		t.Errorf("the admin API's box add is not in the stream")
	}
	if uniq < len(kept) {
		t.Errorf("the sink has %d distinct rows, the store %d", uniq, len(kept))
	}
	for _, k := range kept {
		found := false
		for _, r := range rows {
			found = found || (r.Route == k.Route && r.Status == k.Status && r.At.Sub(k.At).Abs() < time.Millisecond && r.Box == k.Box)
		}
		if !found {
			t.Errorf("audit row %s %d at %v (box %q) never reached the sink", k.Route, k.Status, k.At, k.Box)
		}
	}
	rc.mu.Lock()
	raw := bytes.Clone(rc.raw.Bytes())
	rc.mu.Unlock()
	for _, v := range []string{tok, credential, secretVal, "SINKCANARY"} {
		if bytes.Contains(raw, []byte(v)) {
			t.Errorf("the sink received %q", v)
		}
	}
}
