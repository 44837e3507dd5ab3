package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testAuditBatches writes several hundred entries in batches of the sizes
// the audit Writer forms, one of them larger than any one statement of a
// store may write, and reads every column of every entry back, in the
// order written.
func testAuditBatches(t *testing.T, s store.Store) {
	ctx := t.Context()
	words := [][]string{
		nil,
		{"agent"},
		{"agent", "decide", "web-search", "x1"},
		{`quote"d`, `back\slash`, "<b>&amp;</b>", "naïve", "tab\there", "new\nline", "\u2028", "✓", "emoji-🙂", "a"},
	}
	const n = 333
	entries := make([]store.AuditEntry, n)
	for i := range entries {
		e := store.AuditEntry{
			Box:        fmt.Sprintf("box-%d", i%5),
			At:         at(i / 3).Add(time.Duration(i) * time.Microsecond), // some times repeat to the second, none to the µs
			Method:     []string{"GET", "POST", "DELETE"}[i%3],
			Route:      []string{"/llm/anthropic/v1/messages", "/decide/v1/systemone", "{unmatched}"}[i%3],
			Capability: []string{"inference", "decide", "none"}[i%3],
			Words:      words[i%len(words)],
			Status:     200,
			Duration:   time.Duration(i*1237) * time.Microsecond,
		}
		switch i % 4 {
		case 0:
			e.UpstreamStatus = 200
		case 1:
			e.Box = ""
			e.Status, e.Reason, e.Message = 403, "token", "The token is no box's token at this broker."
		case 2:
			e.Status, e.Reason = 502, "upstream failed"
			e.Message = fmt.Sprintf("The upstream did not answer (entry %d, “quoted”, ✓).", i)
			e.UpstreamStatus = 529
		}
		entries[i] = e
	}
	// Equal times would leave the order to the IDs: give a few entries
	// the time of the one before, so that the IDs must follow the order
	// written.
	for i := 10; i < n; i += 37 {
		entries[i].At = entries[i-1].At
	}
	seq := lastChange(t, s)
	for rest, sizes := entries, []int{1, 128, 129, 2, 73}; len(rest) > 0; sizes = sizes[1:] {
		batch := rest[:min(sizes[0], len(rest))]
		rest = rest[len(batch):]
		must(t, fmt.Sprintf("AddAudit(%d entries)", len(batch)), s.AddAudit(ctx, batch))
	}
	noChange(t, s, "AddAudit", seq)

	got := answer(s.ListAudit(ctx, store.AuditQuery{Limit: n + 10})).must(t, "ListAudit(all)")
	if len(got) != n {
		t.Fatalf("ListAudit(all) = %d entries, want %d", len(got), n)
	}
	want := make([]store.AuditEntry, n)
	for i, e := range entries {
		want[n-1-i] = e
	}
	for i := 1; i < n; i++ {
		if got[i].ID >= got[i-1].ID {
			t.Fatalf("ListAudit(all) entry %d has ID %d after ID %d, want IDs in the order written, newest first", i, got[i].ID, got[i-1].ID)
		}
	}
	same(t, "ListAudit(all)", want, noIDs(got))

	refusals := answer(s.ListAudit(ctx, store.AuditQuery{Box: "box-2", RefusalsOnly: true, Limit: n})).must(t, "ListAudit(box-2 refusals)")
	var wantRefusals []store.AuditEntry
	for _, e := range want {
		if e.Box == "box-2" && e.Reason != "" {
			wantRefusals = append(wantRefusals, e)
		}
	}
	same(t, "ListAudit(box-2 refusals)", wantRefusals, noIDs(refusals))
}
