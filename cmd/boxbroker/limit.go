package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/spend"
)

// runLimit answers `limit set BOX [--principal P] [--input-tpm N]
// [--output-tpm N] [--rpm N]`, `limit list BOX` and `limit remove BOX
// [--principal P]`: token-rate limits of a box's model calls, its own or
// those one principal pays for, in tokens and requests a minute.
func runLimit(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	if sub != "set" && sub != "list" && sub != "remove" {
		return fmt.Errorf("%w: unknown limit command %s (set, list, remove)", errUsage, named(sub))
	}
	cmd := c.command("limit " + sub)
	fs := cmd.FlagSet
	principal := new(string)
	var in, out, rpm *int64
	if sub != "list" {
		principal = fs.String("principal", "", "the limit of the box's calls this principal pays for, such as github:ann; empty for the box's own")
	}
	if sub == "set" {
		in = fs.Int64("input-tpm", 0, "input tokens a minute (0: no bound)")
		out = fs.Int64("output-tpm", 0, "output tokens a minute (0: no bound)")
		rpm = fs.Int64("rpm", 0, "requests a minute (0: no bound)")
	}
	yes := yesFlag(fs, sub == "remove", "remove")
	pos, err := cmd.boxArgs(args, 1, "limit %s takes BOX", sub)
	if err != nil {
		return err
	}
	box := pos[0]
	if *principal != "" {
		if err := checkPrincipal(*principal); err != nil {
			return err
		}
	}
	whose := ofBox("rate limit", box, *principal)
	var lim operator.RateLimitView
	if sub == "set" {
		lim = operator.RateLimitView{Principal: principal, InputTPM: *in, OutputTPM: *out, RPM: *rpm}
		if lim.InputTPM < 0 || lim.OutputTPM < 0 || lim.RPM < 0 || lim.InputTPM+lim.OutputTPM+lim.RPM == 0 {
			return fmt.Errorf("%w: limit set takes at least one of --input-tpm, --output-tpm, --rpm above 0 (none negative); `limit remove` removes a limit", errUsage)
		}
	}
	if sub == "remove" {
		if err := c.sure(*yes, fmt.Sprintf("Remove %s?", whose), "removed", "remove"); err != nil {
			return err
		}
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error { return runLimitOn(ctx, c, be, sub, lim, box, *principal, whose) })
}

// runLimitOn is `limit set|list|remove` on be; lim is the checked limit
// for set, whose its name.
func runLimitOn(ctx context.Context, c *cli, be *backend, sub string, lim operator.RateLimitView, box, principal, whose string) error {
	switch sub {
	case "set":
		_, err := be.SetRateLimit(ctx, box, lim)
		return c.did(err, "set %s to %s; a call past it gets a 429 with Retry-After (every replica holds it within %s)", whose, rateWords(lim), time.Second)
	case "remove":
		return c.removed(be.RemoveRateLimit(ctx, box, principal), whose, "")
	case "list":
		vs, err := be.RateLimits(ctx, box)
		if err != nil {
			return err
		}
		return printRateLimits(c, box, vs)
	}
	return nil
}

// rateWords says l's bounds in words.
func rateWords(l operator.RateLimitView) string {
	var parts []string
	if l.InputTPM > 0 {
		parts = append(parts, fmt.Sprintf("%d input tokens", l.InputTPM))
	}
	if l.OutputTPM > 0 {
		parts = append(parts, fmt.Sprintf("%d output tokens", l.OutputTPM))
	}
	if l.RPM > 0 {
		parts = append(parts, fmt.Sprintf("%d requests", l.RPM))
	}
	return strings.Join(parts, ", ") + " a minute"
}

// printRateLimits writes ls as `limit list` does.
func printRateLimits(c *cli, box string, ls []operator.RateLimitView) error {
	if len(ls) == 0 {
		fmt.Fprintf(c.stdout, "box %s has no rate limit\n", box)
		return nil
	}
	n := func(v int64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	return rows(c.stdout, "LIMIT\tINPUT TPM\tOUTPUT TPM\tRPM", ls, func(l operator.RateLimitView) []any {
		return []any{whose(l.Principal), n(l.InputTPM), n(l.OutputTPM), n(l.RPM)}
	})
}

// printWindowBudgets writes ws, a box's window budgets, as `budget list`
// does after the monthly ones.
func printWindowBudgets(c *cli, ws []operator.WindowBudgetView) error {
	if len(ws) == 0 {
		return nil
	}
	return rows(c.stdout, "BUDGET\tWINDOW\tLIMIT\tSPENT\tHELD\tLEFT\tFROM\tTO", ws, func(w operator.WindowBudgetView) []any {
		if w.To == "" { // a broker that answers no "to": its bucket
			w.To = w.Bucket
		}
		return []any{whose(w.Principal), w.Window, spend.FormatDollars(w.USD), spend.FormatDollars(w.Spent), spend.FormatDollars(w.Held), spend.FormatDollars(w.Left), w.From, w.To}
	})
}
