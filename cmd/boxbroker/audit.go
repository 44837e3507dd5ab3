package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// runAudit lists the audit log: a box's entries (or every entry, with no
// BOX), newest first.
func runAudit(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("audit", &cfg)
	since := fs.String("since", "24h", "how far back: a duration such as 1h or 30m, or an RFC 3339 time")
	refusals := fs.Bool("refusals", false, "list refusals only")
	limit := fs.Int("limit", 100, "list at most this many entries, the newest (1 to 1000)")
	adminURL := c.adminURLFlag(fs)
	// Flags may come before or after BOX.
	boxes, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(boxes) > 1 {
		return fmt.Errorf("%w: audit takes at most one BOX", errUsage)
	}
	box := ""
	if len(boxes) == 1 {
		box = boxes[0]
		if !protocol.IsBoxName(box) {
			return fmt.Errorf("%w: box name %q must match ^[a-z][a-z0-9-]{0,62}$", errUsage, box)
		}
	}
	from, ok := admin.ParseSince(*since, time.Now())
	if !ok {
		return fmt.Errorf("%w: --since %q is neither a duration such as 1h nor an RFC 3339 time", errUsage, *since)
	}
	if *limit < 1 || *limit > 1000 {
		return fmt.Errorf("%w: --limit is from 1 to 1000", errUsage)
	}
	var entries []admin.AuditView
	if *adminURL != "" {
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		q := url.Values{"since": {from.UTC().Format(time.RFC3339)}, "limit": {strconv.Itoa(*limit)}, "refusals": {strconv.FormatBool(*refusals)}}
		if box != "" {
			q.Set("box", box)
		}
		if entries, err = cl.Audit(ctx, q); err != nil {
			return remoteError(err)
		}
	} else {
		st, err := openExisting(ctx, &cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		list, err := st.ListAudit(ctx, store.AuditQuery{Box: box, Since: from, RefusalsOnly: *refusals, Limit: *limit})
		if err != nil {
			return err
		}
		for _, e := range list {
			entries = append(entries, admin.AuditViewOf(e))
		}
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tBOX\tMETHOD\tROUTE\tCAPABILITY\tWORDS\tSTATUS\tUPSTREAM\tMS\tBYTES\tCOST\tREFUSAL\tMESSAGE")
	for _, e := range entries {
		b, up := "-", "-"
		if e.Box != nil {
			b = *e.Box
		}
		if e.UpstreamStatus != nil {
			up = strconv.Itoa(*e.UpstreamStatus)
			if e.PaidBy != nil {
				up += " (" + *e.PaidBy + ")"
			}
		}
		words := strings.Join(e.Words, ",")
		if words == "" {
			words = "-"
		}
		cost := "-"
		if e.USD != 0 {
			cost = spend.FormatUSD(int64(math.Round(e.USD * 1e6)))
		}
		reason, msg := e.Reason, e.Message
		if reason == "" {
			reason = "-"
		}
		// Everything here but the figures came from a request: escaped,
		// so a box cannot drive the operator's terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.1f\t%d\t%s\t%s\t%s\n",
			safe(e.At), safe(b), safe(e.Method), safe(e.Route), safe(e.Capability), safe(words), e.Status, up, e.DurationMs,
			e.Bytes, cost, safe(reason), safe(oneLine(msg)))
	}
	return tw.Flush()
}

// oneLine keeps a message on one table row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
