package ui_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store/sqlite/sqlitetest"
)

var pageLinkRE = regexp.MustCompile(`href="/ui/\?page=(\d+)"`)

// pageLinks are the page numbers a list page links to, in order, with
// duplicates (previous and next) kept.
func pageLinks(body string) []string {
	var out []string
	for _, m := range pageLinkRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestUI_ListPagerLinksAFewPages: at 1,001 boxes (21 pages) the pager
// links the first and last pages, the current page's two neighbours on
// each side, previous and next, not every page; and the store's page,
// searched by title or sorted by spend, is the page shown.
func TestUI_ListPagerLinksAFewPages(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Store: sqlitetest.Fleet(t, 1001)})
	cookie := signIn(t, b, b.AdminToken)

	_, body := get(t, b, "/ui/?page=10", cookie)
	if got := rowNames(body); len(got) != 50 || got[0] != "box-000450" || got[49] != "box-000499" {
		t.Errorf("GET /ui/?page=10 rows = %d from %v, want box-000450 to box-000499", len(got), got[:min(len(got), 1)])
	}
	// previous, 8 9 11 12, last, next (page 10 is bold, no link; page 1's
	// is /ui/).
	if got, want := fmt.Sprint(pageLinks(body)), "[9 8 9 11 12 21 11]"; got != want {
		t.Errorf("GET /ui/?page=10 page links = %s, want previous, 1, 8, 9, 11, 12, 21, next", got)
	}
	if !strings.Contains(body, "1001 boxes") || strings.Count(body, "…") != 2 {
		t.Errorf("GET /ui/?page=10 says no 1001 boxes or has not two gaps in its pager")
	}
	_, body = get(t, b, "/ui/", cookie)
	if got := fmt.Sprint(pageLinks(body)); got != "[2 3 21 2]" {
		t.Errorf("GET /ui/ page links = %s, want 2, 3, 21, next", got)
	}
	_, body = get(t, b, "/ui/?q=NUMBER+777", cookie)
	if got := fmt.Sprint(rowNames(body)); got != "[box-000777]" || !strings.Contains(body, "1 box ·") || !strings.Contains(body, "(1001)") {
		t.Errorf("GET /ui/?q=NUMBER+777 rows = %s, want box-000777 alone, 1 of 1001", got)
	}
	_, body = get(t, b, "/ui/?sort=spend&desc=1&page=2", cookie)
	if got := rowNames(body); len(got) != 50 || got[0] != "box-000750" || got[1] != "box-000745" {
		t.Errorf("GET /ui/?sort=spend&desc=1&page=2 first rows = %v, want box-000750, box-000745", got[:min(len(got), 2)])
	}
	_, body = get(t, b, "/ui/?state=never&page=2", cookie)
	if got := rowNames(body); len(got) != 50 || got[0] != "box-000356" {
		t.Errorf("GET /ui/?state=never&page=2 first row = %v, want box-000356", got[:min(len(got), 1)])
	}
}

// BenchmarkBoxes measures what an operator's view costs at 1,000, 10,000
// and 50,000 boxes (sqlitetest.Fleet): GET /api/boxes?limit=50, the
// owner's page's first view, a search with one hit, and a sort by this
// month's spend.
//
//	go test ./internal/admin/ui/ -run '^$' -bench BenchmarkBoxes -benchtime 20x
func BenchmarkBoxes(b *testing.B) {
	for _, n := range benchSizes() {
		br := brokertest.New(b, brokertest.Options{Store: sqlitetest.Fleet(b, n)})
		cookie := signInTB(b, br)
		cases := []struct{ name, path string }{
			{"api-limit-50", "/api/boxes?limit=50"},
			{"page-first", "/ui/"},
			{"page-search", "/ui/?q=" + sqlitetest.FleetName(n/2)},
			{"page-sort-spend", "/ui/?sort=spend&desc=1"},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("boxes=%d/%s", n, c.name), func(b *testing.B) {
				for b.Loop() {
					status := 0
					if strings.HasPrefix(c.path, "/api/") {
						status = br.Admin("GET", c.path, br.AdminToken, nil).StatusCode
					} else {
						status, _ = get(b, br, c.path, cookie)
					}
					if status != 200 {
						b.Fatalf("GET %s = %d", c.path, status)
					}
				}
			})
		}
	}
}

// benchSizes are BenchmarkBoxes's fleet sizes: 1,000, 10,000 and 50,000,
// or the one BOXBROKER_BENCH_BOXES names.
func benchSizes() []int {
	if n, err := strconv.Atoi(os.Getenv("BOXBROKER_BENCH_BOXES")); err == nil && n > 0 {
		return []int{n}
	}
	return []int{1000, 10000, 50000}
}
