package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// runSpend answers `spend BOX [--month YYYY-MM]`: the broker's measured
// spend beside the spend the box reported, by principal, differences
// flagged, and the usage behind it by payer, principal and model.
func runSpend(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("spend", &cfg)
	month := fs.String("month", spend.Month(time.Now()), "the month to show, YYYY-MM (UTC)")
	adminURL := c.adminURLFlag(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: spend takes one BOX", errUsage)
	}
	box := pos[0]
	if err := boxArg(box); err != nil {
		return err
	}
	if spend.Resets(*month).IsZero() {
		return fmt.Errorf("%w: month %q is not written YYYY-MM", errUsage, *month)
	}
	if *adminURL != "" {
		return runSpendRemote(ctx, c, *adminURL, box, *month)
	}
	st, err := openExisting(ctx, &cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	rep, err := spend.Compare(ctx, st, box, *month)
	if errors.Is(err, store.ErrNotFound) {
		return errors.New(operator.NoBox(box))
	}
	if err != nil {
		return err
	}
	printSpend(c, rep)
	cr, err := spend.Cache(ctx, st, box, *month, time.Now())
	if err != nil {
		return err
	}
	printCache(c, cr)
	return nil
}

// printCache prints rep, a box's prompt-cache use, by payer kind and
// pool entry: the month's and the last 24 hours' tokens and hit ratio.
// It prints nothing when the box made no call in either.
func printCache(c *cli, rep *spend.CacheReport) {
	if len(rep.Lines) == 0 {
		return
	}
	fmt.Fprintf(c.stdout, "\nprompt cache, %s and the last 24 hours (from %s)\n", rep.Month, rep.Since.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PAYER\tENTRY\tHIT\tCACHE-READ\tCACHE-WRITE\tINPUT\tHIT-24H\tCACHE-READ-24H\tCACHE-WRITE-24H\tINPUT-24H")
	row := func(payer, entry string, l spend.CacheLine) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%d\t%d\n", payer, entry,
			hitRatio(l.Month), l.Month.CacheReadTokens, l.Month.CacheWriteTokens, l.Month.InputTokens,
			hitRatio(l.Day), l.Day.CacheReadTokens, l.Day.CacheWriteTokens, l.Day.InputTokens)
	}
	for _, l := range rep.Lines {
		entry := safe(l.Entry)
		if entry == "" {
			entry = "-"
		}
		row(l.PayerKind, entry, l)
	}
	if len(rep.Lines) > 1 {
		row("total", "", rep.Total)
	}
	_ = tw.Flush()
	fmt.Fprintln(c.stdout, "HIT is CACHE-READ over CACHE-READ, CACHE-WRITE and INPUT (the prompt's tokens read uncached).")
}

// hitRatio is c's prompt-cache hit ratio as a percentage, "-" when its
// calls had no prompt tokens.
func hitRatio(c store.CacheUsage) string {
	if c.CacheReadTokens+c.CacheWriteTokens+c.InputTokens <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*c.HitRatio())
}

func printSpend(c *cli, rep *spend.Report) {
	fmt.Fprintf(c.stdout, "box %s, %s (UTC)\n\n", rep.Box, rep.Month)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PRINCIPAL\tMEASURED\tCALLS\tUNPRICED\tUNMEASURED\tCHARGED\tREPORTED\tRUNS\tDIFFERS")
	reported := func(usd float64, runs int64, ok bool) (string, string) {
		if !ok {
			return "-", "-"
		}
		return fmt.Sprintf("$%.2f", usd), fmt.Sprint(runs)
	}
	flag := func(d bool) string {
		if d {
			return "yes"
		}
		return ""
	}
	for _, l := range rep.Lines {
		who := "(none)"
		if l.Principal != nil {
			who = safe(*l.Principal) // as the box reported it
		}
		var usd float64
		var runs int64
		if l.Reported != nil {
			usd, runs = l.Reported.USD, l.Reported.Runs
		}
		r, n := reported(usd, runs, rep.Reported != nil)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", who, spend.FormatUSD(l.Measured), l.Calls, l.Unpriced, l.Unmeasured,
			spend.FormatUSD(l.Charged), r, n, flag(l.Differs))
	}
	var usd float64
	var runs int64
	if rep.Reported != nil {
		usd, runs = rep.Reported.USD, rep.Reported.Runs
	}
	r, n := reported(usd, runs, rep.Reported != nil)
	fmt.Fprintf(tw, "total\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", spend.FormatUSD(rep.Measured), rep.Calls, rep.Unpriced, rep.Unmeasured,
		spend.FormatUSD(rep.Charged), r, n, flag(rep.Differs))
	_ = tw.Flush()

	switch {
	case rep.Reported != nil:
		fmt.Fprintf(c.stdout, "\nREPORTED is the spend the box's last report (%s) carried; a difference over a cent or 5%% is flagged.\n",
			rep.ReportedAt.UTC().Format(time.RFC3339))
	case rep.ReportedMonth != "":
		fmt.Fprintf(c.stdout, "\nThe box's last report (%s) carried its spend for %s, not %s.\n", rep.ReportedAt.UTC().Format(time.RFC3339), safe(rep.ReportedMonth), rep.Month)
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
	tw = tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PAYER\tPRINCIPAL\tMODEL\tCALLS\tINPUT\tOUTPUT\tCACHE-WRITE\tCACHE-READ\tCOST\tUNPRICED\tUNMEASURED")
	for _, u := range rep.Usage {
		who := safe(u.Principal)
		if who == "" {
			who = "-"
		}
		model := safe(u.Model) // as the box's request named it
		if model == "" {
			model = "(unknown)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", u.PayerKind, who, model, u.Calls, u.InputTokens, u.OutputTokens,
			u.CacheWriteTokens, u.CacheReadTokens, spend.FormatUSD(u.Cost), u.Unpriced, u.Unmeasured)
	}
	_ = tw.Flush()
}
