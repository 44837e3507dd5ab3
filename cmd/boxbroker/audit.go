package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// runAudit lists the audit log: a box's entries (or every entry, with no
// BOX), newest first, as a table or (--json) as the admin API's
// AuditList. When there are more entries than --limit shows, it says so
// on stderr; a BOX that is no box and has no entries is an error.
func runAudit(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("audit")
	fs := cmd.FlagSet
	since := fs.String("since", "24h", "how far back: a duration such as 1h or 30m, or an RFC 3339 time")
	refusals := fs.Bool("refusals", false, "list refusals only")
	limit := fs.Int("limit", 100, fmt.Sprintf("list at most this many entries, the newest (1 to %d); when there are more, stderr says so", admin.MaxAuditList))
	asJSON := fs.Bool("json", false, "print the entries as JSON, as the admin API's GET /api/audit answers: {\"entries\": [...]}")
	// Flags may come before or after BOX.
	boxes, err := cmd.args(args, -1, "")
	if err != nil {
		return err
	}
	if len(boxes) > 1 {
		return fmt.Errorf("%w: audit takes at most one BOX", errUsage)
	}
	box := ""
	if len(boxes) == 1 {
		box = boxes[0]
		if err := boxArg(box); err != nil {
			return err
		}
	}
	from, ok := admin.ParseSince(*since, time.Now())
	if !ok {
		return fmt.Errorf("%w: --since %q is neither a duration such as 1h nor an RFC 3339 time", errUsage, *since)
	}
	if *limit < 1 || *limit > admin.MaxAuditList {
		return fmt.Errorf("%w: --limit is from 1 to %d", errUsage, admin.MaxAuditList)
	}
	// One entry more than shown is asked for, to learn whether there are
	// more (the admin API gives at most admin.MaxAuditList).
	ask := *limit + 1
	if *cmd.adminURL != "" {
		ask = min(ask, admin.MaxAuditList)
	}
	var entries []admin.AuditView
	err = cmd.on(ctx, c, false, false, func(be *backend) error {
		var err error
		entries, err = be.ListAudit(ctx, store.AuditQuery{Box: box, Since: from, RefusalsOnly: *refusals, Limit: ask})
		if err != nil || box == "" || len(entries) > 0 {
			return err
		}
		// A removed box's entries are listed still; this one never had any.
		_, err = be.Box(ctx, box)
		if operator.CodeOf(err) == operator.NotFound {
			return errors.New(operator.NoBox(box) + " No audit entries name it since " + from.UTC().Format(time.RFC3339) + ".")
		}
		return err
	})
	if err != nil {
		return err
	}
	more := len(entries) > *limit
	if more {
		entries = entries[:*limit]
	}
	if more || (len(entries) == admin.MaxAuditList && ask == admin.MaxAuditList) {
		narrow := "narrow --since"
		if box == "" {
			narrow += " (or name a BOX)"
		}
		n := fmt.Sprintf("the newest %d entries", len(entries))
		if len(entries) == 1 {
			n = "the newest entry"
		}
		fmt.Fprintf(c.stderr, "audit: showing %s since %s; there are more: %s, or raise --limit (at most %d)\n",
			n, from.UTC().Format(time.RFC3339), narrow, admin.MaxAuditList)
	}
	if *asJSON {
		if entries == nil {
			entries = []admin.AuditView{}
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(admin.AuditList{Entries: entries})
	}
	tw := table(c.stdout, "TIME\tBOX\tMETHOD\tROUTE\tCAPABILITY\tWORDS\tSTATUS\tUPSTREAM\tMS\tBYTES\tCOST\tREFUSAL\tMESSAGE")
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
			cost = spend.FormatDollars(e.USD)
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
