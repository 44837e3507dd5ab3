package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// testListBoxPage lists boxes a page at a time, by name and by spend,
// forward and backward, by cursor and by offset, searched by name and by
// listing title, and reads
// each page's reports and month with it.
func testListBoxPage(t *testing.T, s store.Store) {
	ctx := t.Context()
	hour := time.Date(2026, 10, 3, 14, 0, 0, 0, time.UTC)
	for _, n := range []string{"echo", "alpha", "delta", "bravo", "charlie", "a_b", "a-b"} {
		mustCreateBox(t, s, n)
	}
	settle := func(box, month string, cost int64) {
		t.Helper()
		wantErr(t, "Settle "+box, s.Settle(ctx, store.Settlement{Box: box, Month: month, Charge: cost,
			Usage: []store.Usage{{Box: box, Month: month, PayerKind: "shared", Model: "m", Calls: 1, Cost: cost}}}), nil)
	}
	settle("charlie", "2026-10", 300)
	settle("alpha", "2026-10", 300)
	settle("echo", "2026-10", 900)
	settle("delta", "2026-09", 5000) // another month
	settle("bravo", "2026-10", 0)    // calls, none priced: no spend
	wantErr(t, "SetBudget", s.SetBudget(ctx, store.Budget{Box: "echo", Limit: 1_000_000, UpdatedAt: hour}), nil)
	wantErr(t, "SaveDeclaration", second(s.SaveDeclaration(ctx, "bravo", tokenOf("bravo"), []byte(`{"capabilities":[]}`), hour)), nil)
	wantErr(t, "SaveDeclaration", second(s.SaveDeclaration(ctx, "delta", tokenOf("delta"), []byte(`{"capabilities":[],"listing":{"title":"Weekly Planner"}}`), hour)), nil)

	// names reads every page of q by cursor, returns the names in order.
	names := func(q store.BoxQuery) []string {
		t.Helper()
		var out []string
		for range 20 {
			p := answer(s.ListBoxPage(ctx, q)).must(t, fmt.Sprintf("ListBoxPage(%+v)", q))
			if len(p.Boxes) > q.Limit {
				t.Fatalf("ListBoxPage(%+v) = %d boxes, want at most %d", q, len(p.Boxes), q.Limit)
			}
			for _, b := range p.Boxes {
				out = append(out, b.Box.Name)
			}
			if p.Next == nil {
				return out
			}
			q.After = p.Next
		}
		t.Fatalf("ListBoxPage(%+v) never ends", q)
		return nil
	}
	tests := []struct {
		name string
		q    store.BoxQuery
		want string
	}{
		{"by name", store.BoxQuery{Limit: 2}, "[a-b a_b alpha bravo charlie delta echo]"},
		{"by name, reversed", store.BoxQuery{Limit: 3, Desc: true}, "[echo delta charlie bravo alpha a_b a-b]"},
		{"search", store.BoxQuery{Limit: 1, Search: "HA"}, "[alpha charlie]"},
		{"search, a title too", store.BoxQuery{Limit: 1, Search: "PLANNER"}, "[delta]"},
		{"search is literal", store.BoxQuery{Limit: 5, Search: "_"}, "[a_b]"},
		{"by spend", store.BoxQuery{Limit: 2, Sort: store.BoxSortSpend, Month: "2026-10"}, "[a-b a_b bravo delta alpha charlie echo]"},
		{"by spend, most first", store.BoxQuery{Limit: 2, Sort: store.BoxSortSpend, Month: "2026-10", Desc: true}, "[echo alpha charlie a-b a_b bravo delta]"},
		{"by spend, searched", store.BoxQuery{Limit: 1, Sort: store.BoxSortSpend, Month: "2026-10", Desc: true, Search: "a"}, "[alpha charlie a-b a_b bravo delta]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmt.Sprint(names(tt.q)); got != tt.want {
				t.Errorf("ListBoxPage(%+v) pages = %s, want %s", tt.q, got, tt.want)
			}
		})
	}

	p := answer(s.ListBoxPage(ctx, store.BoxQuery{Limit: 2, Offset: 2, Count: true, Month: "2026-10", Search: "e"})).must(t, "ListBoxPage(offset)")
	if p.Matched != 3 || len(p.Boxes) != 1 || p.Boxes[0].Box.Name != "echo" || p.Next != nil {
		t.Fatalf("ListBoxPage(offset 2, search e) = %+v, want echo alone of 3 matched, no next", p)
	}
	want := store.BoxMonth{Box: "echo", Measured: 900, Calls: 1, HasBudget: true, Limit: 1_000_000, Spent: 900}
	same(t, "ListBoxPage month", want, p.Boxes[0].Month)
	p = answer(s.ListBoxPage(ctx, store.BoxQuery{Limit: 2, After: &store.BoxCursor{Name: "alpha"}})).must(t, "ListBoxPage(after alpha)")
	if len(p.Boxes) != 2 || p.Boxes[0].Box.Name != "bravo" || p.Boxes[0].Declaration == nil || p.Boxes[1].Box.Name != "charlie" ||
		string(p.Boxes[0].Declaration.Doc) != `{"capabilities":[]}` || !sameTime(p.Boxes[0].Declaration.At, hour) || p.Boxes[1].Declaration != nil {
		t.Errorf("ListBoxPage(after alpha) = %+v, want bravo with its report, charlie without", p.Boxes)
	}
	if p.Boxes[0].Box.PayerKind != "shared" || p.Boxes[0].Month != (store.BoxMonth{}) {
		t.Errorf("ListBoxPage(after alpha, no month) = %+v, want the box read and no month", p.Boxes[0])
	}
	for _, q := range []store.BoxQuery{{}, {Limit: store.MaxBoxPage + 1}, {Limit: 1, Sort: "title"}, {Limit: 1, Sort: store.BoxSortSpend}, {Limit: 1, Offset: -1}} {
		if _, err := s.ListBoxPage(ctx, q); err == nil {
			t.Errorf("ListBoxPage(%+v) = nil, want an error", q)
		}
	}
}
