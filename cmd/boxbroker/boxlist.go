package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
)

// boxListPage is how many boxes box list reads, and aligns, at a time:
// it prints each page as it comes, so that its memory does not grow
// with the fleet.
const boxListPage = 500

// listBoxes prints every box be lists, by name, reading and aligning a
// page at a time. PAYER is the payer's kind and principal, FROM where
// the box's token is taken from.
func listBoxes(ctx context.Context, w io.Writer, be operator.Boxes) error {
	tw := table(w, "NAME\tCREATED\tREPORTED\tPAYER\tCONSENT\tPAUSED\tFROM")
	n := 0
	err := be.EachBox(ctx, boxListPage, func(b operator.BoxView) error {
		reported, payer, from := "never", b.Payer.Kind, strings.Join(b.From, ",")
		if b.ReportedAt != nil {
			reported = rfc3339(b.ReportedAt)
		}
		if b.Payer.Principal != nil && *b.Payer.Principal != "" {
			payer += " " + *b.Payer.Principal
		}
		if from == "" {
			from = "any"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%v\t%s\n", b.Name, rfc3339(&b.CreatedAt), reported, safe(payer), b.Consent, b.Paused, from)
		if n++; n%boxListPage == 0 {
			return tw.Flush()
		}
		return nil
	})
	if err != nil {
		return remoteError(err)
	}
	return tw.Flush()
}
