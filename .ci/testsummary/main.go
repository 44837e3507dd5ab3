// Command testsummary reads `go test -json` on stdin and prints what `go
// test` prints without -json — each package's ok or FAIL line, and the
// output of each test that failed — and then every test that skipped,
// with the reason it gave, so that a run says what it did not test and
// why. Its exit status is 0 unless it cannot read its input: go test's
// own says whether the tests passed. test.sh runs
// it: go test -json ./... | go run ./.ci/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// line is one line of a test's output, and the test (or subtest) that
// printed it.
type line struct {
	test, text string
}

// skip is a test that skipped and the reason it printed.
type skip struct {
	pkg, test, reason string
}

// summary holds what is needed until a test ends: the lines of each
// top-level test (its subtests' included) by package and name, and which
// of them failed.
type summary struct {
	out     io.Writer
	lines   map[string][]line   // by package + " " + top-level test
	failed  map[string]bool     // by package + " " + test
	skipped []skip              // in the order they ended
	reasons map[string][]string // a test's own lines, by package + " " + test
	failing bool
}

func main() {
	s := &summary{out: os.Stdout, lines: map[string][]line{}, failed: map[string]bool{}, reasons: map[string][]string{}}
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		os.Exit(1)
	}
	s.printSkips()
	// The exit status is go test's (test.sh runs with pipefail); a
	// failure seen here is said once more, at the end.
	if s.failing {
		fmt.Fprintln(s.out, "FAIL: see the failures above")
	}
}

func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(s.out, sc.Text()) // not an event: as it came
			continue
		}
		s.take(e)
	}
	return sc.Err()
}

// top is the top-level test of test (TestA of TestA/sub).
func top(test string) string {
	t, _, _ := strings.Cut(test, "/")
	return t
}

// noise reports whether a test's output line is one go test prints only
// with -v.
func noise(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func (s *summary) take(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail":
		s.failing = true
	case e.Test == "" && e.Action == "output":
		if t := strings.TrimSpace(e.Output); t != "PASS" && !noise(t) {
			fmt.Fprint(s.out, e.Output)
		}
	case e.Test == "" && e.Action == "fail":
		s.failing = true
		// A test still running when its package failed (a timeout, a
		// crash) never ended: print what it printed.
		for k, ls := range s.lines {
			if strings.HasPrefix(k, e.Package+" ") {
				s.print(ls, nil)
				delete(s.lines, k)
			}
		}
	case e.Test == "":
	case e.Action == "output":
		tk := e.Package + " " + top(e.Test)
		s.lines[tk] = append(s.lines[tk], line{e.Test, e.Output})
		if !noise(e.Output) {
			s.reasons[key] = append(s.reasons[key], e.Output)
		}
	case e.Action == "fail":
		s.failing = true
		s.failed[key] = true
		s.end(e)
	case e.Action == "skip":
		s.skipped = append(s.skipped, skip{pkg: e.Package, test: e.Test, reason: strings.TrimSpace(strings.Join(s.reasons[key], ""))})
		s.end(e)
	case e.Action == "pass":
		s.end(e)
	}
}

// end ends a test: a top-level one's lines are printed when it failed,
// only those of it and of its subtests that failed, as go test prints
// them.
func (s *summary) end(e event) {
	delete(s.reasons, e.Package+" "+e.Test)
	if e.Test != top(e.Test) {
		return
	}
	tk := e.Package + " " + e.Test
	ls := s.lines[tk]
	delete(s.lines, tk)
	if s.failed[tk] {
		s.print(ls, func(test string) bool { return s.failed[e.Package+" "+test] })
	}
	for k := range s.failed {
		if k == tk || strings.HasPrefix(k, tk+"/") {
			delete(s.failed, k)
		}
	}
}

// print prints ls, test by test in the order each first printed, only
// those keep says (all when keep is nil): each test's --- FAIL line
// first, then its lines but those go test prints only with -v, a
// subtest's indented under its parent's, as go test prints them.
func (s *summary) print(ls []line, keep func(test string) bool) {
	var order []string
	by := map[string][]string{}
	for _, l := range ls {
		if _, ok := by[l.test]; !ok {
			order = append(order, l.test)
			by[l.test] = nil
		}
		by[l.test] = append(by[l.test], l.text)
	}
	for _, test := range order {
		if keep != nil && !keep(test) {
			continue
		}
		indent := strings.Repeat("    ", strings.Count(test, "/"))
		var head, rest []string
		for _, text := range by[test] {
			switch t := strings.TrimSpace(text); {
			case strings.HasPrefix(t, "--- FAIL"):
				head = append(head, t+"\n")
			case !noise(t):
				rest = append(rest, text)
			}
		}
		for _, text := range append(head, rest...) {
			fmt.Fprint(s.out, indent+text)
		}
	}
}

// printSkips lists the tests that skipped, each with its reason; the
// subtests of one test that skipped for the same reason are one entry,
// naming them all.
func (s *summary) printSkips() {
	if len(s.skipped) == 0 {
		fmt.Fprintln(s.out, "no test skipped")
		return
	}
	type group struct {
		pkg, test, reason string
		subs              []string
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, k := range s.skipped {
		parent, sub, isSub := strings.Cut(k.test, "/")
		key := k.pkg + " " + parent + " " + k.reason
		if g := byKey[key]; g != nil && isSub && len(g.subs) > 0 {
			g.subs = append(g.subs, sub)
			continue
		}
		g := &group{pkg: k.pkg, test: k.test, reason: k.reason}
		if isSub {
			g.test, g.subs = parent, []string{sub}
			byKey[key] = g
		}
		groups = append(groups, g)
	}
	tests := "tests"
	if len(s.skipped) == 1 {
		tests = "test"
	}
	fmt.Fprintf(s.out, "\n%d %s skipped, each saying what it lacks:\n", len(s.skipped), tests)
	for _, g := range groups {
		pkg := g.pkg
		if i := strings.Index(pkg, "/boxbroker/"); i >= 0 {
			pkg = pkg[i+len("/boxbroker/"):]
		}
		name := g.test
		switch {
		case len(g.subs) == 1:
			name += "/" + g.subs[0]
		case len(g.subs) > 1:
			name += fmt.Sprintf(", %d subtests: %s", len(g.subs), strings.Join(g.subs, " "))
		}
		reason := g.reason
		if reason == "" {
			reason = "(no reason given)"
		}
		// A reason's lines after the first are indented under it.
		reason = strings.ReplaceAll(reason, "\n", "\n      ")
		fmt.Fprintf(s.out, "  %s %s\n      %s\n", pkg, name, reason)
	}
}
