package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/quiet"
)

// safe returns s with every control character (C0, DEL and C1, as
// unicode.IsControl has them) and every invalid UTF-8 byte written as a
// Go escape (\x1b, \u009b), so that text a box sent (scope words,
// principals, routes, messages) cannot move the operator's cursor, ring
// the bell or retitle the terminal when the CLI prints it.
func safe(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// jsonSafe writes JSON to w with DEL and the C1 control characters,
// which encoding/json passes through raw, escaped as \u007f..\u009f: the
// JSON is the same, and a terminal shown it is not driven by it.
type jsonSafe struct{ w io.Writer }

func (j jsonSafe) Write(p []byte) (int, error) {
	s := string(p)
	if !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x7f && r <= 0x9f }) {
		return j.w.Write(p)
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 0x7f && r <= 0x9f {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	if _, err := io.WriteString(j.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// maxNameShown bounds a name a usage error quotes: the longest the CLI
// takes (a box's, a pool entry's) is 64 bytes.
const maxNameShown = 64

// named is an argument as a usage error quotes it where a name or a word
// goes: in quotes when it reads as one (quiet.Plain), otherwise only its
// length. A key or token given where a name goes (a secret's value typed
// in its name's place, a box's token for its name) is never repeated.
func named(s string) string { return quiet.Shown(s, maxNameShown) }

// namedAll is args as a usage error lists them, each named.
func namedAll(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = named(a)
	}
	return strings.Join(out, " ")
}

// didYouMean suggests the closest of names to s, when one is close.
func didYouMean(s string, names []string) string {
	if n := closest(s, names); n != "" {
		return fmt.Sprintf("; did you mean %q?", n)
	}
	return ""
}

// unknownWord is the usage error for sub, no word of the command
// command (box), which takes words: it names the nearest and lists
// them.
func unknownWord(command, sub string, words ...string) error {
	return fmt.Errorf("%w: unknown %s command %s%s (%s)", errUsage, command, named(sub), didYouMean(sub, words), strings.Join(words, ", "))
}

// closest returns the one of names nearest to s (fewer than three edits,
// or else the first that s begins), or "" when none is near.
func closest(s string, names []string) string {
	names = slices.Sorted(slices.Values(names))
	best, dist := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < dist {
			best, dist = n, d
		}
	}
	if best != "" {
		return best
	}
	for _, n := range names {
		if len(s) >= 2 && strings.HasPrefix(n, s) {
			return n
		}
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// table writes to w aligned, header (its columns apart by tabs) the
// first line: every list the CLI prints is one. Each cell is written as
// safe writes it, so that no cell (a name or ID an admin URL answered, a
// word a box sent) can drive the terminal. Flush ends it.
func table(w io.Writer, header string) cells {
	tw := cells{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(tw, header)
	return tw
}

// cells is a table being written (table): what is written to it goes to
// the tabwriter with the text between its tabs and line ends as safe
// writes it.
type cells struct{ *tabwriter.Writer }

func (c cells) Write(p []byte) (int, error) {
	s := string(p)
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && r != '\n' && (r == utf8.RuneError || unicode.IsControl(r)) }) {
		return c.Writer.Write(p)
	}
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, cell := range strings.Split(line, "\t") {
			if j > 0 {
				b.WriteByte('\t')
			}
			b.WriteString(safe(cell))
		}
	}
	if _, err := io.WriteString(c.Writer, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// maxShown bounds what the CLI prints of an error: one a broker or admin
// URL that is not boxbroker's wrote (a refusal's message) may be
// megabytes.
const maxShown = 4 << 10

// shown is err's text as the CLI prints it: every token in it cut
// (proxy.ScrubKept), then cut to maxShown bytes (quiet.Cut), each line
// made safe for a terminal.
func shown(err error) string {
	lines := strings.Split(quiet.Cut(proxy.ScrubKept(err.Error()), maxShown), "\n")
	for i, l := range lines {
		lines[i] = safe(l)
	}
	return strings.Join(lines, "\n")
}
