package store

import (
	"fmt"
	"strings"
)

// Sorts a BoxQuery knows.
const (
	// BoxSortName orders boxes by name (byte order).
	BoxSortName = "name"
	// BoxSortSpend orders boxes by the measured spend of BoxQuery.Month,
	// boxes of equal spend by name.
	BoxSortSpend = "spend"
)

// MaxBoxPage is the most boxes one BoxPage call returns.
const MaxBoxPage = 1000

// BoxQuery asks ListBoxPage for one page of boxes, filtered and sorted by
// the store.
type BoxQuery struct {
	// Search keeps the boxes whose name, or last report's listing title,
	// contains it, in any case (% and _ match themselves); "" keeps every
	// box.
	Search string
	// Sort is BoxSortName ("" too) or BoxSortSpend.
	Sort string
	// Desc reverses the sort; boxes of equal spend stay by name,
	// ascending.
	Desc bool
	// Month (YYYY-MM) is the month whose spend BoxSortSpend sorts by and
	// each ListedBox's Month reports; "" leaves Month zero (and is
	// refused with BoxSortSpend).
	Month string
	// After, when not nil, starts the page after that box of the same
	// query's order (the Next of the page before); Offset then is 0.
	After *BoxCursor
	// Offset skips that many boxes of the order before the page.
	Offset int
	// Limit is how many boxes the page holds at most, 1 to MaxBoxPage.
	Limit int
	// Count asks for BoxPage.Matched.
	Count bool
}

// BoxCursor is where a page of boxes ends: the last box's name and, for
// BoxSortSpend, its spend.
type BoxCursor struct {
	Name  string
	Spend int64
}

// String writes c as the admin API's cursor: the name, or spend:name.
func (c BoxCursor) String() string {
	if c.Spend != 0 {
		return fmt.Sprintf("%d:%s", c.Spend, c.Name)
	}
	return c.Name
}

// ParseBoxCursor reads a cursor String wrote; sort is the query's sort.
func ParseBoxCursor(s, sort string) (BoxCursor, error) {
	if sort != BoxSortSpend {
		return BoxCursor{Name: s}, nil
	}
	n, name, ok := strings.Cut(s, ":")
	if !ok {
		return BoxCursor{Name: s}, nil
	}
	var c BoxCursor
	if _, err := fmt.Sscan(n, &c.Spend); err != nil {
		return BoxCursor{}, fmt.Errorf("cursor %q: %w", s, err)
	}
	c.Name = name
	return c, nil
}

// Check reports what is wrong with q, or nil.
func (q BoxQuery) Check() error {
	switch {
	case q.Sort != "" && q.Sort != BoxSortName && q.Sort != BoxSortSpend:
		return fmt.Errorf("box sort %q is neither %s nor %s", q.Sort, BoxSortName, BoxSortSpend)
	case q.Sort == BoxSortSpend && q.Month == "":
		return fmt.Errorf("box sort %s needs a month", BoxSortSpend)
	case q.Limit < 1 || q.Limit > MaxBoxPage:
		return fmt.Errorf("box page limit %d is not between 1 and %d", q.Limit, MaxBoxPage)
	case q.Offset < 0 || (q.After != nil && q.Offset != 0):
		return fmt.Errorf("box page offset %d is negative or given with a cursor", q.Offset)
	}
	return nil
}

// ListedBox is one box of a BoxPage with what a list shows of it.
type ListedBox struct {
	Box Box
	// Declaration is its last kept report; nil when it never reported.
	Declaration *KeptDeclaration
	// Month is its measured spend, own budget and own tally in the
	// query's Month (a box with none has zero values); zero without a
	// Month.
	Month BoxMonth
}

// BoxPage is one page of boxes.
type BoxPage struct {
	Boxes []ListedBox
	// Matched is how many boxes the query's Search keeps, when it asked.
	Matched int
	// Next is where the next page starts; nil when this page is the last.
	Next *BoxCursor
}

// LikeContains is the LIKE pattern (with \ as escape) that matches
// strings containing s.
func LikeContains(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return "%" + r.Replace(s) + "%"
}

// Cut cuts names, read one past q.Limit so that a next page shows, to
// q's page, and sets p.Next to the cursor of the page after it (with its
// spend from spends, the names' spends, when q sorts by spend), or leaves
// it nil when this page is the last. It returns the names kept.
func (p *BoxPage) Cut(q BoxQuery, names []string, spends []int64) []string {
	if len(names) <= q.Limit {
		return names
	}
	c := BoxCursor{Name: names[q.Limit-1]}
	if q.Sort == BoxSortSpend {
		c.Spend = spends[q.Limit-1]
	}
	p.Next = &c
	return names[:q.Limit]
}
