package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/quiet"
)

// synopses are the usage lines -h prints above a command's flags, by the
// command's words: its arguments, and where its value comes from.
var synopses = map[string]string{
	"serve":             "boxbroker serve [flags]",
	"box add":           "boxbroker box add NAME [flags]\n\nprints the new box's token on stdout",
	"box list":          "boxbroker box list [flags]",
	"box remove":        "boxbroker box remove NAME [--yes] [flags]",
	"box rotate":        "boxbroker box rotate NAME [flags]\n\nprints the box's new token on stdout",
	"box payer":         "boxbroker box payer NAME shared|owner [--principal github:<login>] [flags]\n\nfor owner, the owner's Anthropic key or setup token is read from stdin, never from arguments",
	"box consent":       "boxbroker box consent NAME [on|off] [flags]",
	"box assign":        "boxbroker box assign NAME sandbox|vault|conversation ID [flags]",
	"box unassign":      "boxbroker box unassign NAME sandbox|vault|conversation ID [flags]",
	"box resources":     "boxbroker box resources NAME [flags]",
	"box pause":         "boxbroker box pause NAME [flags]",
	"box resume":        "boxbroker box resume NAME [flags]",
	"credential set":    "boxbroker credential set anthropic|fountain [flags]\n\nthe value is read from stdin, never from arguments",
	"credential add":    "boxbroker credential add anthropic NAME [--weight N] [--url URL] [flags]\n\nthe value is read from stdin, never from arguments",
	"credential list":   "boxbroker credential list [flags]",
	"credential remove": "boxbroker credential remove anthropic|fountain [NAME] [flags]",
	"secret set":        "boxbroker secret set BOX NAME --host URL [--kind KIND] [flags]\n\nthe value is read from stdin, never from arguments",
	"secret rules":      "boxbroker secret rules BOX NAME [--allow 'METHOD PATTERN']... [--rate N/PERIOD] [flags]\n\nsets what the secret may be spent on, keeping its value, host and kind; no value is read.\nWith no --allow and no --rate it clears them: any method and path, no rate",
	"secret list":       "boxbroker secret list BOX [flags]",
	"secret remove":     "boxbroker secret remove BOX NAME [flags]",
	"visitor set":       "boxbroker visitor set PRINCIPAL [flags]\n\nthe visitor's Anthropic key or setup token is read from stdin, never from arguments",
	"visitor list":      "boxbroker visitor list [flags]",
	"visitor remove":    "boxbroker visitor remove PRINCIPAL [flags]",
	"grant issue":       "boxbroker grant issue BOX PRINCIPAL [--ttl 15m] [flags]",
	"grant list":        "boxbroker grant list BOX [flags]",
	"grant revoke":      "boxbroker grant revoke ID [flags]",
	"budget set":        "boxbroker budget set BOX AMOUNT [--principal P] [--window month|day|week|Nd] [flags]\n\nAMOUNT is dollars over the window (a month unless --window says otherwise), 0 or more, such as 5 or 12.50",
	"budget list":       "boxbroker budget list BOX [--month YYYY-MM] [flags]",
	"budget remove":     "boxbroker budget remove BOX [--principal P] [--window month|day|week|Nd] [flags]",
	"limit set":         "boxbroker limit set BOX [--principal P] [--input-tpm N] [--output-tpm N] [--rpm N] [flags]\n\neach is tokens or requests a minute; 0 (the default) is no bound",
	"limit list":        "boxbroker limit list BOX [flags]",
	"limit remove":      "boxbroker limit remove BOX [--principal P] [flags]",
	"feedback list":     "boxbroker feedback list BOX [flags]",
	"feedback export":   "boxbroker feedback export BOX [flags]",
	"spend":             "boxbroker spend BOX [flags]",
	"audit":             "boxbroker audit [BOX] [--since 1h] [--limit N] [--json] [flags]",
	"admin token":       "boxbroker admin token [--name NAME] [flags]\n\nprints the new admin token on stdout",
	"admin tokens":      "boxbroker admin tokens [flags]",
	"admin revoke":      "boxbroker admin revoke ID [flags]",
	"proxy ca":          "boxbroker proxy ca [flags]\n\nprints the egress proxy's CA certificate (PEM) on stdout",
	"proxy ca rotate":   "boxbroker proxy ca rotate [--grace D] [--yes] [flags]",
	"spool dead":        "boxbroker spool dead list | retry ID | drop ID [--yes] [flags]\n\nthe batches of records the store refused for good, set aside in the data directory",
	"spool dead list":   "boxbroker spool dead list [flags]",
	"proposals":         "boxbroker proposals [--box BOX] [--state pending|approved|denied|expired|all] [flags]\n\nlists the refused requests a person may approve (pending ones by default)",
	"approve":           "boxbroker approve ID [--for 15m|1h|7d|always] [flags]\n\napproves a proposal: the box's same request succeeds for that long",
	"deny":              "boxbroker deny ID [flags]\n\ndenies a pending proposal, or withdraws an approval in force",
	"ask":               "boxbroker ask BOX secret:NAME|hosts|budget [--off] [flags]\n\nputs a box's refusals of that kind in ask mode: each opens a proposal",
	"spool dead retry":  "boxbroker spool dead retry ID [flags]",
	"spool dead drop":   "boxbroker spool dead drop ID [--yes] [flags]",
	"report":            "boxbroker report [flags]\n\nposts the box's declaration report to its broker; the box's token is read from BOXBROKER_TOKEN, else from stdin\n(a prompt on a terminal), never from arguments; with a document on stdin (--status -, the default), set BOXBROKER_TOKEN",
	"ready":             "boxbroker ready [--url URL]\n\nasks a running serve's /readyz; exit 0 when it is ready, 1 when not",
	"version":           "boxbroker version\n\nprints the module version and VCS revision it was built from",
	"prices":            "boxbroker prices [--prices FILE] [--unpriced-as MODEL] [--json] [--admin-url URL]\n\nprints the price table, its date, and how a model it does not hold is charged (with --admin-url, the running broker's)",
}

// printUsage prints fs's usage, as -h asks: the command's synopsis (its
// arguments), then its flags.
func printUsage(fs *flag.FlagSet) {
	w := fs.Output()
	words := strings.TrimPrefix(fs.Name(), "boxbroker ")
	s, ok := synopses[words]
	if !ok {
		s = fs.Name() + " [flags]"
	}
	fmt.Fprintf(w, "usage: %s\n", s)
	any := false
	fs.VisitAll(func(*flag.Flag) { any = true })
	if any {
		fmt.Fprint(w, "\nflags:\n")
		printDefaults(fs)
	}
}

// printDefaults is fs.PrintDefaults with each default as helpDefault
// shows it: a default a BOXBROKER_* variable set may be a URL holding a
// credential, and -h output lands in terminals and logs.
func printDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) { f.DefValue = helpDefault(f.DefValue) })
	fs.PrintDefaults()
}

// helpDefault is a flag's default as -h shows it: a URL with more than a
// scheme and a host (a user, a password, a path, a query) as its scheme
// and host and "/…"; a value that does not read as a name or a path (a
// key or a PEM block put in a variable that takes a path, such as
// BOXBROKER_TLS_CERT: quiet.Plain) as its length alone; anything else as
// it is.
func helpDefault(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if !quiet.Plain(v, maxDefaultShown) {
			return quiet.Shown(v, maxDefaultShown)
		}
		return v
	}
	if u.User == nil && (u.Path == "" || u.Path == "/") && u.RawQuery == "" && u.Fragment == "" {
		return v
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// maxDefaultShown bounds the default -h shows.
const maxDefaultShown = 1024

// maxValueShown bounds a malformed value of a flag or a BOXBROKER_*
// variable that a refusal quotes: a number, a duration, a word. One that
// does not read as such (quiet.Plain: a key or token given in the wrong
// variable, BOXBROKER_AUDIT_SINK_BACKLOG for BOXBROKER_AUDIT_SINK_TOKEN)
// is said by its length alone.
const maxValueShown = 256

// badValue matches the flag package's error for a value its flag does not
// parse.
var badValue = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-([^:]+): `)

// parse parses args, wrapping flag errors as usage errors. -h prints the
// command's usage (printUsage); an error prints no usage, only a message
// saying what is wrong: for a value its flag does not take, the flag, the
// value and what it expects, as a malformed BOXBROKER_* variable is told.
func parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err == nil {
		return nil
	}
	if errors.Is(err, flag.ErrHelp) {
		printUsage(fs)
		return err
	}
	return fmt.Errorf("%w: %v (see %s -h)", errUsage, flagError(fs, err), fs.Name())
}

// undefined matches the flag package's error for a flag its set does not
// hold.
var undefined = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)

// flagError rewrites the flag package's errors in the words a person
// acts on: a mistyped flag gets the nearest one its command takes
// (--dat: did you mean --data?), and a value its flag does not parse
// ("invalid value "5/s" for flag -box-rate: parse error") the words a
// malformed variable gets: --box-rate "5/s" is not a number such as 5 or
// 0.5. Other errors are returned as they are.
func flagError(fs *flag.FlagSet, err error) error {
	if m := undefined.FindStringSubmatch(err.Error()); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if n := closest(m[1], names); n != "" {
			return fmt.Errorf("%w; did you mean --%s?", err, n)
		}
		return err
	}
	return valueError(fs, err)
}

// valueError rewrites the flag package's error for a malformed value in
// the words a malformed variable gets (see flagError).
func valueError(fs *flag.FlagSet, err error) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, uerr := strconv.Unquote(m[1])
	f := fs.Lookup(m[2])
	if uerr != nil || f == nil {
		return err
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	want := wants(g.Get())
	if want == "" {
		return err
	}
	return fmt.Errorf("--%s %s is not %s", f.Name, quiet.Shown(value, maxValueShown), want)
}

// wants says what a value of v's type, a flag's or a BOXBROKER_*
// variable's, is to be: "" for a type no flag of boxbroker's has.
func wants(v any) string {
	switch v.(type) {
	case time.Duration:
		return "a duration such as 30s, 10m or 720h"
	case float64:
		return "a number such as 5 or 0.5"
	case int, int64, uint, uint64:
		return "a whole number such as 256"
	case bool:
		return "true or false"
	}
	return ""
}
