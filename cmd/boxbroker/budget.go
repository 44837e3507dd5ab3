package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// runBudget answers `budget set BOX AMOUNT [--principal P]`, `budget list
// BOX [--month YYYY-MM]` and `budget remove BOX [--principal P]`. A budget
// is monthly, in US dollars: the box's own holds every call it makes, a
// principal's the calls of the box that principal pays for.
func runBudget(ctx context.Context, c *cli, args []string) error {
	sub, args := args[0], args[1:]
	cmd := c.command("budget " + sub)
	fs := cmd.FlagSet
	principal, yes, window := new(string), new(bool), new(string)
	month := new(string)
	*month = spend.Month(time.Now())
	switch sub {
	case "set", "remove":
		principal = fs.String("principal", "", "the budget of the box's calls this principal pays for, such as github:ann; empty for the box's own")
		window = fs.String("window", "month", "the budget's window: month (UTC), day, week, or Nd for a rolling N days")
	case "list":
		month = fs.String("month", spend.Month(time.Now()), "the month to show, `YYYY-MM` (UTC)")
	}
	yes = yesFlag(fs, sub == "remove", "remove")
	if sub == "set" {
		// A negative AMOUNT reads as a flag (-5); say what is wrong with it.
		for _, a := range args {
			if a == "--" {
				break
			}
			if len(a) > 1 && a[0] == '-' && (a[1] >= '0' && a[1] <= '9' || a[1] == '.' || a[1] == '$') {
				return fmt.Errorf("%w: a budget cannot be negative (%s): AMOUNT is dollars a month, 0 or more, such as 25.00; `budget remove BOX` leaves the calls unlimited", errUsage, safe(a))
			}
		}
	}
	pos, err := parseSub(fs, args, sub, map[string]arity{
		"set": {2, "budget set takes BOX AMOUNT, in dollars such as 25.00"}, "list": {1, "budget list takes BOX"}, "remove": {1, "budget remove takes BOX"},
	}, fmt.Errorf("%w: unknown budget command %s (set, list, remove)", errUsage, named(sub)))
	if err != nil {
		return err
	}
	box := pos[0]
	if err := boxArg(box); err != nil {
		return err
	}
	if *principal != "" {
		if err := checkPrincipal(*principal); err != nil {
			return err
		}
	}
	if spend.Resets(*month).IsZero() {
		return fmt.Errorf("%w: month %q is not written YYYY-MM", errUsage, *month)
	}
	var limit int64
	if sub == "set" {
		if limit, err = spend.ParseUSD(pos[1]); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if *window == "month" {
		*window = ""
	}
	question := fmt.Sprintf("Remove %s, leaving those calls unlimited?", ofBox("budget", box, *principal))
	if *window != "" {
		w, err := store.ParseWindow(*window)
		if err != nil {
			return fmt.Errorf("%w: %v (or month, the default)", errUsage, err)
		}
		// A window's budget goes alone: the monthly budget, and any
		// other window's, still hold the calls.
		question = fmt.Sprintf("Remove %s? Its other budgets still hold.", ofBox(w.Describe()+" budget", box, *principal))
	}
	if sub == "remove" {
		if err := c.sure(*yes, question, "removed", "remove"); err != nil {
			return err
		}
	}
	return cmd.on(ctx, c, false, false, func(be *backend) error {
		return runBudgetOn(ctx, c, be, sub, box, *principal, *month, *window, limit)
	})
}

// runBudgetOn is `budget set|list|remove` on be, of the monthly budgets
// or, for set and remove, of window's (day, week, Nd; "" for the month);
// limit is the checked amount for set.
func runBudgetOn(ctx context.Context, c *cli, be *backend, sub, box, principal, month, window string, limit int64) error {
	whose, per := ofBox("budget", box, principal), " a month (UTC)"
	if window != "" {
		w, err := store.ParseWindow(window)
		if err != nil {
			return fmt.Errorf("%w: %v (or month, the default)", errUsage, err)
		}
		whose, per = ofBox(w.Describe()+" budget", box, principal), ""
	}
	switch sub {
	case "set":
		usd := json.Number(strings.TrimPrefix(spend.FormatUSD(limit), "$"))
		var err error
		if window != "" {
			_, err = be.SetWindowBudget(ctx, box, operator.WindowBudgetSetting{Window: window, USD: usd, Principal: &principal})
		} else {
			_, err = be.SetBudget(ctx, box, operator.BudgetSetting{USD: usd, Principal: &principal})
		}
		if err := c.held(ctx, be, err, "set %s to %s%s; a call that could take it past that is refused with a 403", whose, spend.FormatUSD(limit), per); err != nil {
			return err
		}
		if principal != "" && window == "" {
			return c.warnUnpaid(ctx, be, box, principal)
		}
	case "remove":
		// --window removes that window's budget and nothing else.
		var err error
		if window != "" {
			err = be.RemoveWindowBudget(ctx, box, principal, window)
		} else {
			err = be.RemoveBudget(ctx, box, principal)
		}
		return c.removed(err, whose, "; its calls are still measured")
	case "list":
		bl, err := be.Budgets(ctx, box, month)
		if err != nil {
			return err
		}
		ws, err := be.WindowBudgets(ctx, box)
		if err != nil {
			return err
		}
		if len(ws) > 0 {
			// With window budgets alone, no empty monthly table above them.
			if len(bl.Budgets) > 0 {
				if err := printBudgets(c, bl); err != nil {
					return err
				}
			}
			return printWindowBudgets(c, ws)
		}
		if len(bl.Budgets) == 0 {
			fmt.Fprintf(c.stdout, "box %s has no budget: its calls are measured (`boxbroker spend %s`) but not limited\n", box, box)
			return nil
		}
		return printBudgets(c, bl)
	}
	return nil
}

// warnUnpaid warns, after a budget for principal on box is set, when no
// call of the box is paid by principal now: the box is not paid by its
// owner principal and holds no current grant from principal, so the
// budget holds nothing until one of them is so.
func (c *cli) warnUnpaid(ctx context.Context, be *backend, box, principal string) error {
	b, err := be.Box(ctx, box)
	if err != nil {
		return err
	}
	gs, err := be.ListGrants(ctx, box)
	if err != nil {
		return err
	}
	for _, g := range gs {
		if g.Principal == principal && g.State == operator.GrantCurrent {
			return nil
		}
	}
	if b.Payer.Kind == protocol.PayerOwner && b.Payer.Principal != nil && *b.Payer.Principal == principal {
		return nil
	}
	fmt.Fprintf(c.stderr, "warning: no call of box %s is paid by %s now: the box is not paid by %s as its owner and holds no current grant from %s, so this budget limits nothing until it is "+
		"(`boxbroker box payer %s owner --principal %s`, or `boxbroker grant issue %s %s`); the box's own budget (no --principal) limits every call it makes\n",
		box, principal, principal, principal, box, principal, box, principal)
	return nil
}

// held says what a change on be, which returned err, did. On the data
// directory it first waits, as a report's 200 does, until every running
// broker's cache has either read the change or stopped answering from
// memory, so the next call is held to it on every replica.
func (c *cli) held(ctx context.Context, be *backend, err error, format string, args ...any) error {
	if err == nil && be.svc != nil {
		err = cache.WaitStale(ctx, cache.DefaultMaxStale)
	}
	return c.did(err, format, args...)
}

// removed says what a removal of whose, which returned err, did: "removed
// whose" and after, or, for a NotFound refusal, that there is no whose.
func (c *cli) removed(err error, whose, after string) error {
	if operator.CodeOf(err) == operator.NotFound {
		return fmt.Errorf("there is no %s: %w", whose, remoteError(err))
	}
	return c.did(err, "removed %s%s", whose, after)
}

// ofBox names what (a budget, a rate limit) of box: its own, or that of
// the calls principal pays for when principal is not "".
func ofBox(what, box, principal string) string {
	if principal == "" {
		return "box " + box + "'s own " + what
	}
	return "the " + what + " of " + principal + " on box " + box
}

// printBudgets writes bl's monthly budgets as `budget list` does.
func printBudgets(c *cli, bl operator.BudgetList) error {
	resets, _ := time.Parse(time.RFC3339, bl.Resets)
	return rows(c.stdout, "BUDGET\tLIMIT\tSPENT\tHELD\tLEFT\tMONTH\tRESETS", bl.Budgets, func(b operator.BudgetView) []any {
		return []any{whose(b.Principal), spend.FormatDollars(b.USD), spend.FormatDollars(b.Spent), spend.FormatDollars(b.Held), spend.FormatDollars(b.Left),
			bl.Month, resets.UTC().Format(time.RFC3339)}
	})
}

// whose is a list's BUDGET or LIMIT column: the principal p, or "box"
// for the box's own (nil or "").
func whose(p *string) string {
	if p == nil || *p == "" {
		return "box"
	}
	return safe(*p)
}
