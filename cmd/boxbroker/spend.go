package main

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
)

// runSpend answers `spend BOX [--month YYYY-MM]`: the broker's measured
// spend beside the spend the box reported, by principal, differences
// flagged, and the usage behind it by payer, principal and model.
func runSpend(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("spend")
	month := cmd.String("month", spend.Month(time.Now()), "the month to show, YYYY-MM (UTC)")
	pos, err := cmd.boxArgs(args, 1, "spend takes one BOX")
	if err != nil {
		return err
	}
	if spend.Resets(*month).IsZero() {
		return fmt.Errorf("%w: month %q is not written YYYY-MM", errUsage, *month)
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		sr, err := be.Spend(ctx, pos[0], *month)
		if err != nil {
			return err
		}
		printSpend(c, sr)
		printCache(c, sr.Month, sr.Cache)
		return nil
	})
}

// printCache prints v, a box's prompt-cache use in month, by payer kind
// and pool entry: the month's and the last 24 hours' tokens and hit
// ratio. It prints nothing when the box made no call in either.
func printCache(c *cli, month string, v operator.CacheView) {
	if len(v.ByEntry) == 0 {
		return
	}
	fmt.Fprintf(c.stdout, "\nprompt cache, %s and the last 24 hours (from %s)\n", safe(month), rfc3339(&v.Since))
	tw := table(c.stdout, "PAYER\tENTRY\tHIT\tCACHE-READ\tCACHE-WRITE\tINPUT\tHIT-24H\tCACHE-READ-24H\tCACHE-WRITE-24H\tINPUT-24H")
	row := func(payer, entry string, m, d operator.CacheTokens) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", payer, entry,
			hitRatio(m), m.CacheReadTokens, m.CacheWriteTokens, m.InputTokens,
			hitRatio(d), d.CacheReadTokens, d.CacheWriteTokens, d.InputTokens)
	}
	for _, l := range v.ByEntry {
		entry := "-"
		if l.Entry != nil && *l.Entry != "" {
			entry = safe(*l.Entry)
		}
		row(l.Payer, entry, l.Month, l.Last24h)
	}
	if len(v.ByEntry) > 1 {
		row("total", "", v.Month, v.Last24h)
	}
	_ = tw.Flush()
	fmt.Fprintln(c.stdout, "HIT is CACHE-READ over CACHE-READ, CACHE-WRITE and INPUT (the prompt's tokens read uncached).")
}

// hitRatio is t's prompt-cache hit ratio as a percentage, "-" when its
// calls had no prompt tokens.
func hitRatio(t operator.CacheTokens) string {
	if t.HitRatio == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100**t.HitRatio)
}

// printSpend prints rep, a box's spend in a month, measured beside
// reported, and the usage behind it.
func printSpend(c *cli, rep operator.SpendReport) {
	fmt.Fprintf(c.stdout, "box %s, %s (UTC)\n\n", safe(rep.Box), safe(rep.Month))
	tw := table(c.stdout, "PRINCIPAL\tMEASURED\tCALLS\tUNPRICED\tUNMEASURED\tCHARGED\tREPORTED\tRUNS\tDIFFERS")
	reported := func(r *operator.ReportedSpend) (string, string) {
		if rep.Reported == nil {
			return "-", "-"
		}
		var usd float64
		var runs int64
		if r != nil {
			usd, runs = r.USD, r.Runs
		}
		return fmt.Sprintf("$%.2f", usd), fmt.Sprint(runs)
	}
	flag := func(d bool) string {
		if d {
			return "yes"
		}
		return ""
	}
	for _, l := range rep.ByPrincipal {
		who := "(none)"
		if l.Principal != nil {
			who = safe(*l.Principal) // as the box reported it
		}
		r, n := reported(l.Reported)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", who, spend.FormatDollars(l.MeasuredUSD), l.Calls, l.Unpriced, l.Unmeasured,
			spend.FormatDollars(l.ChargedUSD), r, n, flag(l.Differs))
	}
	r, n := reported(rep.Reported)
	fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", spend.FormatDollars(rep.MeasuredUSD), rep.Calls, rep.Unpriced, rep.Unmeasured,
		spend.FormatDollars(rep.ChargedUSD), r, n, flag(rep.Differs))
	_ = tw.Flush()

	switch {
	case rep.Reported != nil:
		fmt.Fprintf(c.stdout, "\nREPORTED is the spend the box's last report (%s) carried; a difference over a cent or 5%% is flagged.\n",
			rfc3339(rep.ReportedAt))
	case rep.ReportedMonth != nil && *rep.ReportedMonth != "":
		fmt.Fprintf(c.stdout, "\nThe box's last report (%s) carried its spend for %s, not %s.\n", rfc3339(rep.ReportedAt), safe(*rep.ReportedMonth), safe(rep.Month))
	default:
		fmt.Fprintln(c.stdout, "\nThe box's last report carried no spend.")
	}
	if rep.Unpriced > 0 || rep.Unmeasured > 0 {
		fmt.Fprintln(c.stdout, "MEASURED counts only priced calls whose usage was read whole; CHARGED counts the others at their reservation, the most they could have cost.")
	}
	if len(rep.Usage) == 0 {
		return
	}
	fmt.Fprintln(c.stdout)
	tw = table(c.stdout, "PAYER\tPRINCIPAL\tMODEL\tCALLS\tINPUT\tOUTPUT\tCACHE-WRITE\tCACHE-READ\tCOST\tUNPRICED\tUNMEASURED")
	for _, u := range rep.Usage {
		who := "-"
		if u.Principal != nil && *u.Principal != "" {
			who = safe(*u.Principal)
		}
		model := "(unknown)"
		if u.Model != nil && *u.Model != "" {
			model = safe(*u.Model) // as the box's request named it
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", u.Payer, who, model, u.Calls, u.InputTokens, u.OutputTokens,
			u.CacheWriteTokens, u.CacheReadTokens, spend.FormatDollars(u.CostUSD), u.Unpriced, u.Unmeasured)
	}
	_ = tw.Flush()
}
