package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_BoxShowsCacheHitRatio: a box whose calls hit the prompt cache on
// one pool entry and then went to another, where its cache is cold,
// shows on its card the month's and the last 24 hours' hit ratio, the
// drop flagged, and a line per entry.
func TestUI_BoxShowsCacheHitRatio(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	ctx := context.Background()
	now := time.Now().UTC()
	before := now.Add(-30 * time.Hour)
	earlier := before.Format("2006-01") == now.Format("2006-01")
	if !earlier {
		before = now // the month began within the day: both in it
	}
	settle := func(entry string, at time.Time, input, write, read int64) {
		t.Helper()
		c := store.CacheUsage{Box: "alpha", PayerKind: "pool", Entry: entry, Hour: at.Truncate(time.Hour), Calls: 1,
			InputTokens: input, CacheWriteTokens: write, CacheReadTokens: read}
		if err := b.Server.Store.Settle(ctx, store.Settlement{Box: "alpha", Month: at.Format("2006-01"), Cache: []store.CacheUsage{c}}); err != nil {
			t.Fatal(err)
		}
	}
	settle("first", before, 0, 100, 900)
	settle("second", now, 10, 90, 0)
	cookie, _ := signedInForm(t, b)

	list := visit(t, b, "GET", "/ui/", cookie, nil, nil).body
	wantCell := `<td class="num cache">82% <span class="dim">of 82% this month</span></td>` // both in the last 24 h
	if earlier {
		wantCell = `<td class="num cache"><span class="warn" title="under half the month's">0%</span> <span class="dim">of 82% this month</span></td>`
	}
	if !strings.Contains(list, wantCell) || !strings.Contains(list, "Cache hit 24 h") {
		t.Errorf("the list's row of alpha lacks %q:\n%s", wantCell, list)
	}
	for _, path := range []string{"/ui/boxes/alpha"} {
		p := visit(t, b, "GET", path, cookie, nil, nil)
		if p.status != 200 {
			t.Fatalf("GET %s = %d", path, p.status)
		}
		i := strings.Index(p.body, `<dd class="cache">`)
		if i < 0 {
			t.Fatalf("GET %s: the card shows no prompt cache:\n%s", path, p.body)
		}
		dd := p.body[i : i+strings.Index(p.body[i:], "</dd>")]
		want := []string{"<b>82%</b> of prompt tokens read from the cache in " + now.Format("2006-01"),
			"<td>pool</td><td>first</td><td class=\"num\">90%</td>",
			"<td>pool</td><td>second</td><td class=\"num\">0%</td><td class=\"num\">0%</td><td class=\"num\">0</td><td class=\"num\">90</td><td class=\"num\">10</td>"}
		if earlier {
			want = append(want, "<b>0%</b> in the last 24 h", "stopped hitting",
				"<td class=\"num\">90%</td><td class=\"num\">—</td><td class=\"num\">900</td>")
		}
		for _, w := range want {
			if !strings.Contains(dd, w) {
				t.Errorf("GET %s: the card's prompt cache lacks %q:\n%s", path, w, dd)
			}
		}
	}
}
