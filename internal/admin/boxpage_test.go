package admin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store/sqlite/sqlitetest"
)

// TestAdmin_BoxesPaged: GET /api/boxes pages a fleet of 1,001 boxes by
// a cursor, searches names and titles, sorts by this month's spend, and
// refuses the unpaged answer past 1,000 boxes rather than growing with
// the fleet.
func TestAdmin_BoxesPaged(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Store: sqlitetest.Fleet(t, 1001)})
	tok := b.AdminToken
	names := func(l admin.BoxList) string {
		var out []string
		for _, v := range l.Boxes {
			out = append(out, v.Name)
		}
		return strings.Join(out, ",")
	}

	if msg := refusal(t, "GET /api/boxes of 1001", b.Admin("GET", "/api/boxes", tok, nil), 400); !strings.Contains(msg, "limit=1000") {
		t.Errorf("GET /api/boxes of 1001 = %q, want it to say how to page", msg)
	}
	var page admin.BoxList
	decode(t, "GET ?limit=1000", b.Admin("GET", "/api/boxes?limit=1000", tok, nil), 200, &page)
	if len(page.Boxes) != 1000 || page.Boxes[0].Name != "box-000000" || page.Next != "box-000999" {
		t.Fatalf("GET ?limit=1000 = %d boxes from %s, next %q, want 1000 from box-000000, next box-000999", len(page.Boxes), page.Boxes[0].Name, page.Next)
	}
	if v := page.Boxes[1]; v.ReportedAt == nil || len(v.Capabilities) != 2 || v.Listing == nil || v.Listing.Title != sqlitetest.FleetTitle(1) {
		t.Errorf("GET ?limit=1000 box-000001 = %+v, want its report read", v)
	}
	if v := page.Boxes[6]; v.ReportedAt != nil {
		t.Errorf("GET ?limit=1000 box-000006 = %+v, want never reported", v)
	}
	var last admin.BoxList
	decode(t, "GET ?after=", b.Admin("GET", "/api/boxes?limit=1000&after="+page.Next, tok, nil), 200, &last)
	if got := names(last); got != "box-001000" || last.Next != "" {
		t.Errorf("GET ?after=%s = %s next %q, want box-001000 and no next", page.Next, got, last.Next)
	}

	tests := []struct {
		name, query, want, next string
	}{
		{"search by name", "q=box-00050&limit=3", "box-000500,box-000501,box-000502", "box-000502"},
		{"search by title", "q=NUMBER+777", "box-000777", ""},
		{"search with no hit", "q=nothing", "", ""},
		{"most spend first", "sort=spend&desc=1&limit=2", "box-001000,box-000995", "995:box-000995"},
		{"after a spend cursor", "sort=spend&desc=1&limit=2&after=995:box-000995", "box-000990,box-000985", "985:box-000985"},
		{"reversed names", "desc=1&limit=2", "box-001000,box-000999", "box-000999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l admin.BoxList
			decode(t, "GET ?"+tt.query, b.Admin("GET", "/api/boxes?"+tt.query, tok, nil), 200, &l)
			if got := names(l); got != tt.want || l.Next != tt.next {
				t.Errorf("GET /api/boxes?%s = %s next %q, want %s next %q", tt.query, got, l.Next, tt.want, tt.next)
			}
		})
	}
	for _, bad := range []string{"limit=0", "limit=1001", "limit=x", "sort=title", "after=Not%20a%20name", "sort=spend&after=x:box-1", "q=" + strings.Repeat("x", 65)} {
		refusal(t, fmt.Sprintf("GET /api/boxes?%s", bad), b.Admin("GET", "/api/boxes?"+bad, tok, nil), 400)
	}
}
