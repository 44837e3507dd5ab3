package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intentius/boxbroker/client"
	"github.com/intentius/boxbroker/internal/protocol"
)

// maxDocument bounds a status or runs document the report command reads.
const maxDocument = 32 << 20

// runReport is the steward's side: `boxbroker report` reads what
// `chant workspace status --json` prints (and optionally what
// `chant workspace runs --json` prints, for this month's spend) and posts
// the box's declaration report to its broker with the box's token.
func runReport(ctx context.Context, c *cli, args []string) error {
	fs := flag.NewFlagSet("boxbroker report", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	// A back-quoted word in a flag's usage is the name its value is shown
	// under in -h: `FILE`, never a command.
	statusFile := fs.String("status", "-", "`FILE` holding what \"chant workspace status --json\" prints; - for stdin")
	box := fs.String("box", "", "the member whose box block to report (default: the only member with a box block)")
	runsFile := fs.String("runs", "", "`FILE` holding what \"chant workspace runs --json\" prints, to report a month's spend (optional)")
	month := fs.String("month", time.Now().UTC().Format("2006-01"), "the spend's calendar month, `YYYY-MM` (UTC); report says which month it reports")
	brokerURL := fs.String("url", c.envOr("BOXBROKER_URL", c.getenv("STUDIO_URL")), "the broker's base `URL` (BOXBROKER_URL, else STUDIO_URL)")
	dryRun := fs.Bool("dry-run", false, "print the report and post nothing (needs no URL or token)")
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "data" || name == "store") {
			return fmt.Errorf("%w: report takes no --%s: it posts to a broker over HTTP (--url or BOXBROKER_URL) and opens no store", errUsage, name)
		}
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// The argument is not echoed: it may be a token typed where it
		// does not belong.
		return fmt.Errorf("%w: report takes no arguments (the token is never an argument: set BOXBROKER_TOKEN or pipe it in)", errUsage)
	}
	if *runsFile != "" && !protocol.IsMonth(*month) {
		return fmt.Errorf("%w: --month %q is not a month written YYYY-MM", errUsage, *month)
	}
	token := c.getenv("BOXBROKER_TOKEN")
	if !*dryRun {
		if *brokerURL == "" {
			return fmt.Errorf("%w: no broker URL: give --url or set BOXBROKER_URL", errUsage)
		}
		if token == "" && (*statusFile == "-" || *runsFile == "-") {
			return fmt.Errorf("%w: the token and a document cannot both come from stdin: set BOXBROKER_TOKEN, or give the documents as files", errUsage)
		}
	}

	status, err := c.readDocument(*statusFile, "status")
	if err != nil {
		return err
	}
	report, err := client.ReportFromStatus(status, *box)
	if err != nil {
		return statusFailure(err, status)
	}
	if *runsFile != "" {
		runs, err := c.readDocument(*runsFile, "runs")
		if err != nil {
			return err
		}
		spend, err := client.SpendFromRuns(runs, *month)
		if err != nil {
			return err
		}
		if spend == nil {
			fmt.Fprintf(c.stderr, "boxbroker report: %s holds no runs list (%s); the report carries no spend\n", *runsFile, runsFailure(runs))
		} else {
			fmt.Fprintf(c.stderr, "boxbroker report: spend for %s (UTC): %d runs, $%.2f, %d unpriced", spend.Month, spend.Runs, spend.USD, spend.Unpriced)
			if months := runMonths(runs); spend.Runs == 0 && len(months) > 0 {
				fmt.Fprintf(c.stderr, "; the runs document has runs only in %s: give --month YYYY-MM to report one of those", strings.Join(months, ", "))
			} else if *month == time.Now().UTC().Format("2006-01") {
				fmt.Fprint(c.stderr, " (this month; --month YYYY-MM for another)")
			}
			fmt.Fprintln(c.stderr)
		}
		report.Spend = spend
	}
	if *dryRun {
		return c.printJSON(report)
	}

	if token == "" {
		b, err := c.readSecret("box token: ")
		if err != nil {
			return fmt.Errorf("read the box token: %w", err)
		}
		token = string(b)
	}
	cl, err := client.New(*brokerURL, token)
	if err != nil {
		return err
	}
	kept, err := cl.Report(ctx, report)
	if err != nil {
		return err
	}
	return c.printJSON(kept)
}

// readDocument reads a JSON document from a file, or stdin for "-".
func (c *cli) readDocument(name, what string) ([]byte, error) {
	var r io.Reader = c.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read the %s document: %w", what, err)
		}
		defer f.Close()
		r = f
	}
	b, err := readAtMost(r, maxDocument, "read the "+what+" document", fmt.Sprintf("the %s document is over %d MiB", what, maxDocument>>20))
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("the %s document is empty", what)
	}
	return b, nil
}

// runsFailure says why a runs document holds no runs list, from chant's
// failure document when it is one.
func runsFailure(doc []byte) string {
	var f struct {
		Error *struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(doc, &f) == nil && f.Error != nil {
		return "chant said: " + f.Error.Message
	}
	return "it is not what `chant workspace runs --json` prints"
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(jsonSafe{c.stdout})
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write the answer: %w", err)
	}
	return nil
}

// runMonths lists, sorted, the months (YYYY-MM) in which a runs document's
// runs started.
func runMonths(doc []byte) []string {
	var d struct {
		Runs []struct {
			StartedAt any `json:"startedAt"`
		} `json:"runs"`
	}
	if json.Unmarshal(doc, &d) != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, r := range d.Runs {
		if s, ok := r.StartedAt.(string); ok && protocol.IsMonth(safePrefix(s, 7)) {
			seen[s[:7]] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func safePrefix(s string, n int) string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

// statusFailure says more of a status document the report could not be
// made from: what report expected to find, and what the document's top
// level holds instead.
func statusFailure(err error, doc []byte) error {
	var top map[string]json.RawMessage
	if !strings.Contains(err.Error(), "box block") || json.Unmarshal(doc, &top) != nil {
		return err
	}
	if _, ok := top["members"]; ok {
		return fmt.Errorf("%w: report expects what \"chant workspace status --json\" prints, a top-level \"members\" list in which one member has a \"box\" block ({\"capabilities\": [...], \"listing\": ...}), the box block of chant.workspace.json", err)
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, safe(k))
	}
	sort.Strings(keys)
	holds := "holds " + strings.Join(keys, ", ")
	if len(keys) == 0 {
		holds = "is empty"
	}
	hint := ""
	if _, ok := top["sample"]; ok {
		hint = `; the document under "sample" is one: extract it first, as in jq .sample FILE`
	}
	return fmt.Errorf("%w: report expects what \"chant workspace status --json\" prints, a top-level \"members\" list in which one member has a \"box\" block; this document's top level %s%s", err, holds, hint)
}
