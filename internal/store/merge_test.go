package store

import (
	"math"
	"testing"
)

func TestMerge_AddsToItsRowOrAppends(t *testing.T) {
	byModel := func(m string) func(*Usage) bool { return func(u *Usage) bool { return u.Model == m } }
	var rows []Usage
	rows = Merge(rows, Usage{Model: "a", Calls: 1, Cost: 5}, byModel("a"))
	rows = Merge(rows, Usage{Model: "b", Calls: 1, Cost: 7}, byModel("b"))
	rows = Merge(rows, Usage{Model: "a", Calls: 2, Cost: math.MaxInt64}, byModel("a"))
	if len(rows) != 2 {
		t.Fatalf("Merge: %d rows, want 2: %+v", len(rows), rows)
	}
	if rows[0].Model != "a" || rows[0].Calls != 3 || rows[0].Cost != math.MaxInt64 {
		t.Errorf("Merge: row a = %+v, want 3 calls at the capped cost", rows[0])
	}
	if rows[1].Model != "b" || rows[1].Calls != 1 || rows[1].Cost != 7 {
		t.Errorf("Merge: row b = %+v, want 1 call costing 7", rows[1])
	}
	cache := Merge(nil, CacheUsage{Entry: "e", Calls: 1}, func(c *CacheUsage) bool { return c.Entry == "e" })
	cache = Merge(cache, CacheUsage{Entry: "e", Calls: 1}, func(c *CacheUsage) bool { return c.Entry == "e" })
	if len(cache) != 1 || cache[0].Calls != 2 {
		t.Errorf("Merge: cache rows = %+v, want one of 2 calls", cache)
	}
}
