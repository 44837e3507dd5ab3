package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/intentius/boxbroker/internal/operator"
)

// boxListPage is how many boxes box list reads, and aligns, at a time:
// it prints each page as it comes, so that its memory does not grow
// with the fleet.
const boxListPage = 500

// boxTable prints box list's table, aligned a page at a time.
type boxTable struct {
	tw *tabwriter.Writer
	n  int // lines since the last flush
}

func newBoxTable(w io.Writer) *boxTable {
	return &boxTable{tw: table(w, "NAME\tCREATED\tREPORTED\tPAYER\tCONSENT\tPAUSED\tFROM")}
}

// line prints one box; payer is its kind and principal ("" for none),
// from the addresses its token is bound to ("" for any).
func (t *boxTable) line(name, created, reported, kind, principal string, consent, paused bool, from string) error {
	payer := kind
	if principal != "" {
		payer += " " + principal
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%v\t%v\t%s\n", name, created, reported, safe(payer), consent, paused, fromColumn(from))
	if t.n++; t.n >= boxListPage {
		t.n = 0
		return t.tw.Flush()
	}
	return nil
}

func (t *boxTable) flush() error { return t.tw.Flush() }

// listBoxes prints every box be lists, by name, reading a page at a
// time.
func listBoxes(ctx context.Context, w io.Writer, be operator.Boxes) error {
	t := newBoxTable(w)
	err := be.EachBox(ctx, boxListPage, func(b operator.BoxView) error {
		reported, principal := "never", ""
		if b.ReportedAt != nil {
			reported = rfc3339(b.ReportedAt)
		}
		if b.Payer.Principal != nil {
			principal = *b.Payer.Principal
		}
		return t.line(b.Name, rfc3339(&b.CreatedAt), reported, b.Payer.Kind, principal, b.Consent, b.Paused, strings.Join(b.From, ","))
	})
	if err != nil {
		return remoteError(err)
	}
	return t.flush()
}
