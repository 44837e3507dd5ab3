package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/store"
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
	t := &boxTable{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, "NAME\tCREATED\tREPORTED\tPAYER\tCONSENT\tPAUSED\tFROM")
	return t
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

// listBoxes prints every box in st, by name, reading a page at a time.
func listBoxes(ctx context.Context, w io.Writer, st store.Store) error {
	t := newBoxTable(w)
	q := store.BoxQuery{Limit: boxListPage}
	for {
		p, err := st.ListBoxPage(ctx, q)
		if err != nil {
			return err
		}
		for _, lb := range p.Boxes {
			b, reported := lb.Box, "never"
			if lb.Declaration != nil {
				reported = lb.Declaration.At.UTC().Format(time.RFC3339)
			}
			if err := t.line(b.Name, b.CreatedAt.UTC().Format(time.RFC3339), reported, b.PayerKind, b.PayerPrincipal, b.Consent, b.Paused, store.FormatFrom(b.From)); err != nil {
				return err
			}
		}
		if p.Next == nil {
			return t.flush()
		}
		q.After = p.Next
	}
}

// listRemoteBoxes prints every box the admin API behind cl lists, by
// name, paging through GET /api/boxes.
func listRemoteBoxes(ctx context.Context, w io.Writer, cl *adminclient.Client) error {
	t := newBoxTable(w)
	err := cl.EachBox(ctx, boxListPage, func(b admin.BoxView) error {
		reported, principal := "never", ""
		if b.ReportedAt != nil {
			reported = *b.ReportedAt
		}
		if b.Payer.Principal != nil {
			principal = *b.Payer.Principal
		}
		return t.line(b.Name, b.CreatedAt, reported, b.Payer.Kind, principal, b.Consent, b.Paused, strings.Join(b.From, ","))
	})
	if err != nil {
		return remoteError(err)
	}
	return t.flush()
}
