package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// DefaultBoxPage is how many boxes a page of GET /api/boxes holds when
// it is asked for a page (after, q or sort) without a limit.
const DefaultBoxPage = 100

// MaxSearch is the longest search GET /api/boxes and the owner's page take.
const MaxSearch = 64

// BoxQuery reads GET /api/boxes's paging parameters: limit (1 to
// store.MaxBoxPage), after (the cursor an answer's next gave), q (a
// search of names), sort (name or spend) and desc (1 to reverse). paged
// is false when none is given: the answer is then every box, as long as
// there are at most store.MaxBoxPage of them.
func BoxQuery(v url.Values) (q store.BoxQuery, paged bool, err error) {
	bad := func(msg string) (store.BoxQuery, bool, error) {
		return store.BoxQuery{}, false, operator.Errorf(operator.Invalid, "%s", msg)
	}
	for _, k := range []string{"limit", "after", "q", "sort", "desc"} {
		paged = paged || v.Has(k)
	}
	if !paged {
		return store.BoxQuery{Limit: store.MaxBoxPage}, false, nil
	}
	q = store.BoxQuery{Limit: DefaultBoxPage, Search: v.Get("q"), Sort: v.Get("sort"), Desc: v.Get("desc") == "1"}
	if v.Has("limit") {
		n, err := strconv.Atoi(v.Get("limit"))
		if err != nil || n < 1 || n > store.MaxBoxPage {
			return bad(fmt.Sprintf("limit is a number of boxes from 1 to %d.", store.MaxBoxPage))
		}
		q.Limit = n
	}
	switch q.Sort {
	case "", store.BoxSortName:
		q.Sort = store.BoxSortName
	case store.BoxSortSpend:
	default:
		return bad("sort is name or spend.")
	}
	if len(q.Search) > MaxSearch {
		return bad(fmt.Sprintf("q, the search, is at most %d characters.", MaxSearch))
	}
	if after := v.Get("after"); after != "" {
		c, err := store.ParseBoxCursor(after, q.Sort)
		if err != nil || !protocol.IsBoxName(c.Name) {
			return bad("after is the next of the answer before, with the same sort.")
		}
		q.After = &c
	}
	return q, true, nil
}

// listBoxes answers GET /api/boxes: a page of boxes when asked for one
// (BoxQuery), else every box, published listings first, each part by
// name — refused when there are more than store.MaxBoxPage, so that no
// answer grows with the fleet.
func (s *Server) listBoxes(r *http.Request) (BoxList, error) {
	q, paged, err := BoxQuery(r.URL.Query())
	if err != nil {
		return BoxList{}, err
	}
	boxes, next, err := s.op.BoxPage(r.Context(), q)
	if err != nil || paged {
		return BoxList{Boxes: boxes, Next: next}, operator.StoreError(err, "", "")
	}
	if next != "" {
		return BoxList{}, operator.Errorf(operator.Invalid,
			"There are more than %d boxes: ask for them a page at a time, GET /api/boxes?limit=%d, then again with after set to each answer's next until an answer has none.", store.MaxBoxPage, store.MaxBoxPage)
	}
	sort.SliceStable(boxes, func(i, j int) bool {
		if pi, pj := published(boxes[i]), published(boxes[j]); pi != pj {
			return pi
		}
		return boxes[i].Name < boxes[j].Name
	})
	return BoxList{Boxes: boxes}, nil
}
