package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// docs returns README.md and every docs/*.md, by path relative to the
// checkout's root.
func docs(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(root, "README.md"))
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
	}
	return out
}

// codeOf returns the code a Markdown text holds: each line of its fenced
// blocks, and each inline code span of its other lines.
func codeOf(md string) []string {
	var out []string
	fenced := false
	span := regexp.MustCompile("`[^`]+`")
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, line)
			continue
		}
		for _, s := range span.FindAllString(line, -1) {
			out = append(out, strings.Trim(s, "`"))
		}
	}
	return out
}

// TestDocs_NamedTestsExist: every test, fuzz target and benchmark the
// README and docs/*.md name (docs/attacks.md and docs/reliability.md name
// the test that holds each row) is a function of some _test.go file in
// the checkout; a name ending in _ stands for those it begins.
func TestDocs_NamedTestsExist(t *testing.T) {
	have := testFuncs(t)
	named := regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z0-9]\w*`)
	for path, md := range docs(t) {
		for _, name := range named.FindAllString(md, -1) {
			if have[name] {
				continue
			}
			if prefix, ok := strings.CutSuffix(name, "_"); ok && slices.ContainsFunc(keys(have), func(h string) bool { return strings.HasPrefix(h, prefix+"_") }) {
				continue
			}
			t.Errorf("%s names %s, which no _test.go file holds", path, name)
		}
	}
}

// TestDocs_EveryFuzzTargetListed: docs/reliability.md's Fuzzing table
// lists every fuzz target of the checkout, which BOXBROKER_FULL=1
// ./test.sh fuzzes.
func TestDocs_EveryFuzzTargetListed(t *testing.T) {
	md := docs(t)["docs/reliability.md"]
	for name := range testFuncs(t) {
		if strings.HasPrefix(name, "Fuzz") && !strings.Contains(md, "| `"+name+"` |") {
			t.Errorf("docs/reliability.md's Fuzzing table has no row for %s", name)
		}
	}
}

// testFuncs returns the names of the test, fuzz, benchmark and example
// functions of every _test.go file in the checkout.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	root := filepath.Join("..", "..")
	have := map[string]bool{}
	fn := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range fn.FindAllStringSubmatch(string(b), -1) {
			have[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return have
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestREADME_ServeFlagsAreTheTable: the README's Configuration table
// lists each flag `serve -h` shows, and no other.
func TestREADME_ServeFlagsAreTheTable(t *testing.T) {
	_, help, code := run(t, t.TempDir(), "", "serve", "-h")
	if code != 0 {
		t.Fatalf("serve -h exits %d: %s", code, help)
	}
	var shown []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		shown = append(shown, m[1])
	}
	readme := docs(t)["README.md"]
	start, end := strings.Index(readme, "\n## Configuration"), strings.Index(readme, "\n## Running it as a service")
	if start < 0 || end < start {
		t.Fatal("README.md has no ## Configuration followed by ## Running it as a service")
	}
	var table []string
	for _, line := range strings.Split(readme[start:end], "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		for _, m := range regexp.MustCompile("`--([a-z-]+)`").FindAllStringSubmatch(first, -1) {
			table = append(table, m[1])
		}
	}
	sort.Strings(shown)
	sort.Strings(table)
	table = slices.Compact(table)
	for _, f := range shown {
		if !slices.Contains(table, f) {
			t.Errorf("serve -h shows --%s, which the README's Configuration table does not list", f)
		}
	}
	for _, f := range table {
		if !slices.Contains(shown, f) {
			t.Errorf("the README's Configuration table lists --%s, which serve -h does not show", f)
		}
	}
}

// TestDocs_EnvVariablesAreRead: every BOXBROKER_* variable the README,
// docs/*.md and deploy/boxbroker.env name is one boxbroker reads (or
// ./test.sh and the tests do), so none is warned of as unknown.
func TestDocs_EnvVariablesAreRead(t *testing.T) {
	texts := docs(t)
	env, err := os.ReadFile(filepath.Join("..", "..", "deploy", "boxbroker.env"))
	if err != nil {
		t.Fatal(err)
	}
	texts["deploy/boxbroker.env"] = string(env)
	known := knownEnv()
	for path, text := range texts {
		for _, v := range regexp.MustCompile(`\bBOXBROKER_[A-Z0-9_]*[A-Z0-9]\b`).FindAllString(text, -1) {
			if !slices.Contains(known, v) {
				t.Errorf("%s names %s, which boxbroker does not read (knownEnv)", path, v)
			}
		}
	}
}

// TestDocs_CommandsTakeTheirFlags: every `boxbroker` command in the code
// of the README and docs/*.md (fenced blocks and inline spans) is one
// boxbroker has, and takes each flag written after it.
func TestDocs_CommandsTakeTheirFlags(t *testing.T) {
	dir := t.TempDir()
	// A command is up to three words; the longest that `-h` answers with
	// a usage is the command, the rest its arguments.
	usage := map[string]string{} // command words → its -h text, "" for none
	helpOf := func(words []string) string {
		key := strings.Join(words, " ")
		if h, ok := usage[key]; ok {
			return h
		}
		_, errs, code := run(t, dir, "", append(slices.Clone(words), "-h")...)
		h := ""
		if code == 0 && strings.Contains(errs, "usage") {
			h = errs
		}
		usage[key] = h
		return h
	}
	cmd := regexp.MustCompile(`(?:^|[\s($|])(?:\./)?boxbroker((?: +[a-z][a-z0-9-]*)+)([^#|]*)`)
	flagRe := regexp.MustCompile(`(?:^|[\s\[])--([a-z][a-z-]*)`)
	// The code of every document, and the commands of the README's
	// Commands table as boxbroker commands, each alternative (a|b) as its
	// first.
	codes := map[string][]string{}
	all := docs(t)
	for path, md := range all {
		codes[path] = codeOf(md)
	}
	readme := all["README.md"]
	start, end := strings.Index(readme, "\n## Commands\n"), strings.Index(readme, "\n## Operating it\n")
	if start < 0 || end < start {
		t.Fatal("README.md has no ## Commands followed by ## Operating it")
	}
	alt := regexp.MustCompile(`([\w:-]+)(?:\|[\w:…-]+)+`)
	tableRows := 0
	for _, line := range strings.Split(readme[start:end], "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		tableRows++
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		for _, span := range codeOf(strings.ReplaceAll(first, `\|`, "|")) {
			if !strings.HasPrefix(span, "--") {
				codes["README.md's Commands table"] = append(codes["README.md's Commands table"], "boxbroker "+alt.ReplaceAllString(span, "$1"))
			}
		}
	}
	if tableRows < 30 {
		t.Errorf("README.md's Commands table has %d rows, want its whole table: is the pattern still right?", tableRows)
	}
	checked := 0
	for path, code := range codes {
		for _, code := range code {
			for _, m := range cmd.FindAllStringSubmatch(code, -1) {
				rest, _, _ := strings.Cut(m[2], "boxbroker ")
				words := strings.Fields(m[1])
				var help, name string
				for n := min(len(words), 3); n > 0 && help == ""; n-- {
					help, name = helpOf(words[:n]), strings.Join(words[:n], " ")
				}
				if help == "" {
					t.Errorf("%s: `boxbroker%s` is no command boxbroker has", path, m[1])
					continue
				}
				for _, f := range flagRe.FindAllStringSubmatch(rest, -1) {
					checked++
					if !strings.Contains(help, "\n  -"+f[1]+" ") && !strings.Contains(help, "\n  -"+f[1]+"\n") {
						t.Errorf("%s: `boxbroker %s` takes no --%s (in %q)", path, name, f[1], strings.TrimSpace(m[0]))
					}
				}
			}
		}
	}
	if checked < 60 {
		t.Errorf("checked %d flags of commands in the docs, want them all (over 60): is the pattern still right?", checked)
	}
}

// anchors returns the anchors GitHub gives a Markdown text's headings:
// lower case, punctuation but - and _ dropped, spaces as -, a repeated
// one numbered.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		heading := strings.TrimLeft(line, "#")
		if fenced || len(heading) == len(line) || len(line)-len(heading) > 6 || !strings.HasPrefix(heading, " ") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(heading))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocs_LinksAndPathsResolve: every relative link of the README and
// docs/*.md leads to a file of the checkout and, with a #fragment, to one
// of its headings; every path of the checkout the docs name in code
// (`internal/…`, `cmd/…`, `deploy/…`, …) exists.
func TestDocs_LinksAndPathsResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	all := docs(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	path := regexp.MustCompile("^(?:internal|cmd|conformance|e2e|bench|client|deploy|testdata)/[A-Za-z0-9_./-]+$")
	for name, md := range all {
		prose := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(md, "")
		for _, m := range link.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			rel := name
			if file != "" {
				rel = filepath.ToSlash(filepath.Join(filepath.Dir(name), file))
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s links to %s, which is no file of the checkout", name, target)
				continue
			}
			if frag == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			text, ok := all[rel]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, rel))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			if !anchors(text)[frag] {
				t.Errorf("%s links to %s, whose file has no heading #%s", name, target, frag)
			}
		}
		// A link whose words are a document's name leads to that document.
		for _, m := range regexp.MustCompile(`\[([\w.-]+\.md)\]\(([^)#\s]+)`).FindAllStringSubmatch(prose, -1) {
			if filepath.Base(m[2]) != m[1] {
				t.Errorf("%s links the words %s to %s", name, m[1], m[2])
			}
		}
		for _, code := range codeOf(md) {
			if p := strings.TrimSuffix(code, "/"); path.MatchString(p) {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s names %s, which is no path of the checkout", name, code)
				}
			}
		}
	}
}

// TestREADME_WhichCommandsMakeADataDirectory: the commands the README
// says make a data directory make one, and the other commands that write
// refuse a directory with no boxbroker data in it, making nothing.
func TestREADME_WhichCommandsMakeADataDirectory(t *testing.T) {
	readme := docs(t)["README.md"]
	m := regexp.MustCompile("(?s)Only (`serve`.*?) make a data directory").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no sentence \"Only `serve`, … make a data directory\"")
	}
	var makers []string
	for _, w := range regexp.MustCompile("`([a-z ]+)`").FindAllStringSubmatch(m[1], -1) {
		if w[1] != "serve" { // serve makes one as it starts; the serve tests start on new directories
			makers = append(makers, w[1])
		}
	}
	args := map[string][]string{ // a command's words → a whole command line
		"box add":         {"box", "add", "salad"},
		"credential set":  {"credential", "set", "anthropic"},
		"credential add":  {"credential", "add", "anthropic", "second"},
		"admin token":     {"admin", "token"},
		"visitor set":     {"visitor", "set", "github:ann"},
		"box payer":       {"box", "payer", "salad", "owner"},
		"secret set":      {"secret", "set", "salad", "KEY", "--host", "https://api.example.com"},
		"budget set":      {"budget", "set", "salad", "5"},
		"limit set":       {"limit", "set", "salad", "--rpm", "5"},
		"grant issue":     {"grant", "issue", "salad", "github:ann"},
		"ask":             {"ask", "salad", "hosts"},
		"proxy ca":        {"proxy", "ca"},
		"box bind":        {"box", "bind", "salad", "--from", "10.0.0.0/8"},
		"credential list": {"credential", "list"},
	}
	base := t.TempDir()
	for words, line := range args {
		t.Run(words, func(t *testing.T) {
			dir := filepath.Join(base, strings.ReplaceAll(words, " ", "-"))
			_, errs, code := run(t, "", "sk-ant-api03-NOT-A-REAL-KEY-0123456789\n", append(line, "--data", dir)...)
			_, err := os.Stat(filepath.Join(dir, "boxbroker.db"))
			if slices.Contains(makers, words) {
				if code != 0 || err != nil {
					t.Errorf("%s on a new data directory = %d %q (database: %v); the README says it makes one", words, code, errs, err)
				}
				return
			}
			if code == 0 || !strings.Contains(errs, "no boxbroker data at") {
				t.Errorf("%s on a new data directory = %d %q; the README says only %v make one", words, code, errs, makers)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%s made %s; the README says only %v make a data directory", words, dir, makers)
			}
		})
	}
	for _, w := range makers {
		if _, ok := args[w]; !ok {
			t.Errorf("the README says %s makes a data directory; give this test a command line for it", w)
		}
	}
}

// TestDocs_MetricsAreTheCode: every metric boxbroker registers
// (internal/…: a prometheus Name or NewDesc, or the metrics package's
// counter and counterVec) is named in the docs, and
// every boxbroker_ name the docs give is one the code has (a metric, or
// the session cookie, the flow cookie, the change channel).
func TestDocs_MetricsAreTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	metric := regexp.MustCompile(`(?:Name:\s*|NewDesc\(|counter(?:Vec)?\()"(boxbroker_[a-z0-9_]+)"`)
	literal := regexp.MustCompile(`"(boxbroker_[a-z0-9_]+)"`)
	metrics, names := map[string]bool{}, map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range metric.FindAllStringSubmatch(string(b), -1) {
			metrics[m[1]] = true
		}
		for _, m := range literal.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(metrics) < 20 {
		t.Fatalf("found %d metrics in internal/, want them all: is the pattern still right?", len(metrics))
	}
	named := map[string]bool{}
	for path, md := range docs(t) {
		for _, n := range regexp.MustCompile(`\bboxbroker_[a-z0-9_]*[a-z0-9]`).FindAllString(md, -1) {
			named[n] = true
			if !names[n] {
				t.Errorf("%s names %s, which boxbroker does not have", path, n)
			}
		}
	}
	for m := range metrics {
		if !named[m] {
			t.Errorf("boxbroker registers the metric %s, which no document names", m)
		}
	}
}
