package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Reader is the part of the store a report reads.
type Reader interface {
	store.Boxes
	store.Declarations
	store.Spend
}

// BudgetStatus is one budget and where it stands in a month.
type BudgetStatus struct {
	store.Budget
	Month string
	// Spent and Reserved are the month's tally, in micro-dollars.
	Spent    int64
	Reserved int64
	// Left is Limit less Spent and Reserved, never below zero.
	Left int64
	// Resets is when the month's tally gives way to the next.
	Resets time.Time
}

// Budgets returns box's budgets and where each stands in month;
// store.ErrNotFound if there is no such box.
func Budgets(ctx context.Context, st Reader, box, month string) ([]BudgetStatus, error) {
	if _, err := st.Box(ctx, box); err != nil {
		return nil, err
	}
	bs, err := st.ListBudgets(ctx, box)
	if err != nil {
		return nil, err
	}
	ts, err := st.Tallies(ctx, box, month)
	if err != nil {
		return nil, err
	}
	out := make([]BudgetStatus, len(bs))
	for i, b := range bs {
		s := BudgetStatus{Budget: b, Month: month, Resets: Resets(month)}
		for _, t := range ts {
			if t.Principal == b.Principal {
				s.Spent, s.Reserved = t.Spent, t.Reserved
			}
		}
		s.Left = max(b.Limit-s.Spent-s.Reserved, 0)
		out[i] = s
	}
	return out, nil
}

// Counts are what the broker measured and charged of calls: of one
// principal (a Line), or of them all (a Report).
type Counts struct {
	// Measured is what the broker measured of priced calls whose usage it
	// read whole, in micro-dollars; Calls, Unpriced and Unmeasured count
	// the calls (see store.Usage).
	Measured   int64
	Calls      int64
	Unpriced   int64
	Unmeasured int64
	// Charged is what was charged against budgets, in micro-dollars: the
	// measured cost, or a call's bound where its cost was not known.
	Charged int64
}

// add counts u's calls and measured cost.
func (c *Counts) add(u store.Usage) {
	c.Measured += u.Cost
	c.Calls += u.Calls
	c.Unpriced += u.Unpriced
	c.Unmeasured += u.Unmeasured
}

// Line is one principal's spend in a month: as the broker measured it and
// as the box reported it.
type Line struct {
	// Principal is nil for calls paid with no principal (the operator's
	// shared credential) and for runs the box reported by no one.
	Principal *string
	Counts
	// Reported is the box's own figure for this principal; nil when its
	// report named no such principal for the month.
	Reported *protocol.PrincipalSpend
	// Differs is true when Measured and Reported's USD differ by more
	// than Tolerance allows (a missing side counting as zero).
	Differs bool
}

// Report is a box's spend in one month, measured beside reported.
type Report struct {
	Box   string
	Month string
	// Lines are by principal: nil first, then by name.
	Lines []Line
	// Counts are the totals of the lines.
	Counts
	// Reported is the spend the box's last declaration report carried for
	// Month; nil when it carried none for that month. ReportedMonth is the
	// month the carried spend is for, which may not be Month ("" when the
	// report carried none), and ReportedAt when the report was taken.
	Reported      *protocol.Spend
	ReportedMonth string
	ReportedAt    time.Time
	// Differs is true when the totals, or any line, differ.
	Differs bool
	// Usage is the measured usage behind the lines, by payer kind,
	// principal and model.
	Usage []store.Usage
}

// Tolerance is the difference between measured and reported dollars that
// is not flagged: a cent, or 5% of the larger, whichever is more. The box
// prices its runs itself, counts a run in the month it started, and may
// report before its last calls end, so the two rarely agree to the cent.
func Tolerance(a, b int64) int64 {
	return max(10_000, max(a, b)/20)
}

func differs(measured int64, reported float64) bool {
	r := int64(reported*1e6 + 0.5)
	d := measured - r
	if d < 0 {
		d = -d
	}
	return d > Tolerance(measured, r)
}

// Compare builds box's Report for month (YYYY-MM): the broker's measured
// spend beside the spend the box reported in its last declaration, by
// principal, with every difference flagged. store.ErrNotFound if there is
// no such box.
func Compare(ctx context.Context, st Reader, box, month string) (*Report, error) {
	if Resets(month).IsZero() {
		return nil, fmt.Errorf("month %q is not written YYYY-MM", month)
	}
	if _, err := st.Box(ctx, box); err != nil {
		return nil, err
	}
	usage, err := st.ListUsage(ctx, box, month)
	if err != nil {
		return nil, err
	}
	tallies, err := st.Tallies(ctx, box, month)
	if err != nil {
		return nil, err
	}
	rep := &Report{Box: box, Month: month, Usage: usage}
	lines := map[string]*Line{} // by principal, "" for none
	line := func(p string) *Line {
		if l, ok := lines[p]; ok {
			return l
		}
		l := &Line{}
		if p != "" {
			l.Principal = &p
		}
		lines[p] = l
		return l
	}
	for _, u := range usage {
		line(u.Principal).add(u)
		rep.add(u)
	}
	var byPrincipals int64
	for _, t := range tallies {
		if t.Principal == "" {
			rep.Charged = t.Spent
			continue
		}
		line(t.Principal).Charged = t.Spent
		byPrincipals += t.Spent
	}
	if rep.Charged > byPrincipals || lines[""] != nil {
		line("").Charged = max(rep.Charged-byPrincipals, 0)
	}

	doc, at, err := st.Declaration(ctx, box)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		var d protocol.Declaration
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, fmt.Errorf("box %s's kept declaration: %w", box, err)
		}
		rep.ReportedAt = at
		if d.Spend != nil {
			rep.ReportedMonth = d.Spend.Month
			if d.Spend.Month == month {
				rep.Reported = d.Spend
				for i := range d.Spend.ByPrincipal {
					ps := d.Spend.ByPrincipal[i]
					p := ""
					if ps.Principal != nil {
						p = *ps.Principal
					}
					line(p).Reported = &ps
				}
			}
		}
	}

	for _, l := range lines {
		if rep.Reported != nil {
			reported := 0.0
			if l.Reported != nil {
				reported = l.Reported.USD
			}
			l.Differs = differs(l.Measured, reported)
			rep.Differs = rep.Differs || l.Differs
		}
		rep.Lines = append(rep.Lines, *l)
	}
	if rep.Reported != nil && differs(rep.Measured, rep.Reported.USD) {
		rep.Differs = true
	}
	sort.Slice(rep.Lines, func(i, j int) bool {
		a, b := rep.Lines[i].Principal, rep.Lines[j].Principal
		if a == nil || b == nil {
			return a == nil && b != nil
		}
		return *a < *b
	})
	return rep, nil
}
