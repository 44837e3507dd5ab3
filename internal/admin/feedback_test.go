package admin_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestAdmin_FeedbackIsListedAPageAtATime: GET /api/boxes/{name}/feedback
// answers a page of a box's batches, newest first, and next leads
// through the rest, each once, until an answer has none; the count is
// every batch the box keeps, and after that is not an answer's next is
// a 400.
func TestAdmin_FeedbackIsListedAPageAtATime(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AdminToken
	boxes := map[string]string{"alpha": b.AddBox("alpha"), "beta": b.AddBox("beta")}
	ctx := context.Background()
	const n = 120
	var ids []int64
	for i := range n {
		for _, box := range []string{"alpha", "beta"} {
			added, err := b.Server.Store.AddFeedback(ctx, store.FeedbackBatch{Box: box, At: time.Now(), Words: []string{"agent"},
				Body: []byte(fmt.Sprintf(`{"entries":[%d]}`, i))}, token.Hash(boxes[box]), store.FeedbackBound{})
			if err != nil {
				t.Fatal(err)
			}
			if box == "alpha" {
				ids = append(ids, added.ID)
			}
		}
	}
	slices.Reverse(ids)

	var first admin.FeedbackList
	decode(t, "GET feedback", b.Admin("GET", "/api/boxes/alpha/feedback", tok, nil), 200, &first)
	if first.Count != n || len(first.Batches) != 50 || first.Next == "" {
		t.Fatalf("GET feedback = %d batches of %d, next %q, want the newest 50 of %d and a next", len(first.Batches), first.Count, first.Next, n)
	}
	var got []int64
	pages := 0
	for url := "/api/boxes/alpha/feedback?limit=50"; url != ""; pages++ {
		if pages > n/50+1 {
			t.Fatalf("GET feedback pages never end: %d batches in %d pages", len(got), pages)
		}
		var fl admin.FeedbackList
		decode(t, "GET "+url, b.Admin("GET", url, tok, nil), 200, &fl)
		if fl.Count != n {
			t.Errorf("GET %s count = %d, want %d", url, fl.Count, n)
		}
		for _, f := range fl.Batches {
			got = append(got, f.ID)
		}
		url = ""
		if fl.Next != "" {
			url = "/api/boxes/alpha/feedback?limit=50&after=" + fl.Next
		}
	}
	if !slices.Equal(got, ids) || pages != 3 {
		t.Errorf("GET feedback page by page = %d batches in %d pages, want alpha's %d, newest first, in 3", len(got), pages, n)
	}
	for _, bad := range []string{"after=0", "after=-1", "after=x", "after=1.5", "limit=1001"} {
		refusal(t, "GET feedback?"+bad, b.Admin("GET", "/api/boxes/alpha/feedback?"+bad, tok, nil), 400)
	}
}
