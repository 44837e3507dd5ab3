package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/spend"
)

// runPrices is `boxbroker prices`: the price table serve charges by — the
// built-in one, or that with --prices FILE over it — with the date its
// prices were checked and how a model it does not name is charged. With
// --json it prints the table as a price file, which --prices takes back.
// With --admin-url it prints the running broker's table, read through
// the admin API, as the same.
func runPrices(ctx context.Context, c *cli, args []string) error {
	fs := flag.NewFlagSet("boxbroker prices", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	file := fs.String("prices", c.getenv("BOXBROKER_PRICES"), "JSON price file over the built-in table, as serve takes it (BOXBROKER_PRICES)")
	unpricedAs := fs.String("unpriced-as", c.getenv("BOXBROKER_UNPRICED_AS"), "model whose price a model neither in the table nor of a family in it is charged at; empty for the dearest (BOXBROKER_UNPRICED_AS)")
	asJSON := fs.Bool("json", false, "print the table as a price file (the form --prices takes)")
	adminURL := c.adminURLFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: prices takes no arguments, got %s", errUsage, namedAll(fs.Args()))
	}
	var p *spend.Prices
	var err error
	if *adminURL != "" {
		local := false
		fs.Visit(func(f *flag.Flag) { local = local || f.Name == "prices" || f.Name == "unpriced-as" })
		if local {
			return fmt.Errorf("%w: --prices and --unpriced-as read a price file here; with --admin-url, prices prints the broker's own table", errUsage)
		}
		cl, err := c.adminClient(*adminURL)
		if err != nil {
			return err
		}
		t, err := cl.Prices(ctx)
		if err != nil {
			return remoteError(err)
		}
		if p, err = t.Prices(); err != nil {
			return err
		}
		*file = t.Path // the price file the broker read over the built-in table, "" for none
	} else {
		if p, err = spend.LoadPrices(*file); err != nil {
			return fmt.Errorf("price file (--prices, BOXBROKER_PRICES): %w", err)
		}
		if p, err = p.WithUnpricedAs(*unpricedAs); err != nil {
			return fmt.Errorf("--unpriced-as (BOXBROKER_UNPRICED_AS): %w", err)
		}
	}
	if *asJSON {
		b, err := p.File()
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(b)
		return err
	}
	from := "the built-in table"
	if *file != "" {
		from = safe(*file) + " over the built-in table"
	}
	fmt.Fprintf(c.stdout, "Prices of %s, in US dollars per million tokens, checked %s", from, p.Checked())
	if p.Source() != "" {
		fmt.Fprintf(c.stdout, " against %s", safe(p.Source()))
	}
	fmt.Fprintln(c.stdout, ".")
	fmt.Fprintln(c.stdout)
	err = rows(c.stdout, "MODEL\tINPUT\tOUTPUT\tCACHE WRITE 5M\tCACHE WRITE 1H\tCACHE READ\tCONTEXT\tLONGER INPUT", p.Models(), func(id string) []any {
		pr, _ := p.Get(id)
		long := "-"
		if pr.LongContext != nil {
			l := pr.LongContext
			long = fmt.Sprintf("over %s: %s/%s/%s/%s/%s", spend.FormatTokens(pr.LongContextAbove), rate(l.Input), rate(l.Output), rate(l.CacheWrite), rate(l.CacheWrite1h), rate(l.CacheRead))
		}
		return []any{safe(id), rate(pr.Input), rate(pr.Output), rate(pr.CacheWrite), rate(pr.CacheWrite1h), rate(pr.CacheRead), spend.FormatTokens(pr.Context), long}
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	for _, id := range p.Removed() {
		fmt.Fprintf(c.stdout, "%s is unpriced: the price file removes it.\n", safe(id))
	}
	fmt.Fprintf(c.stdout, "A dated ID (claude-sonnet-4-5-20250929) is priced as the ID without its date. A model the table\n"+
		"does not name but of a family it has (claude-opus-N) is charged as the family's newest model in it, and\n"+
		"any other as %s (--unpriced-as); serve warns of each such model once, counts its calls in\n"+
		"boxbroker_unpriced_calls_total, and a price file (--prices; --json prints this table as one) prices it.\n", safe(p.UnpricedAs()))
	return nil
}

// rate writes a rate in dollars per million tokens: two decimals, or as
// many as it has up to six.
func rate(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i < 0 {
		return s + ".00"
	} else if len(s)-i-1 < 2 {
		return s + "0"
	}
	return s
}
