package main

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestCLI_MistypedFlagSuggests(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"box", "list", "--dat", dir}, "did you mean --data?"},
		{[]string{"box", "--dat", dir, "list"}, "did you mean --data?"},
		{[]string{"serve", "--anthropic-uri", "http://127.0.0.1:1"}, "did you mean --anthropic-url?"},
		{[]string{"admin", "token", "--nme", "ci"}, "did you mean --name?"},
		{[]string{"ready", "--ulr", "http://127.0.0.1:1"}, "did you mean --url?"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, errs, code := runIn(t, nil, "", tt.args...)
			if code != 2 || !strings.Contains(errs, tt.want) {
				t.Errorf("boxbroker %v = %d %q, want exit 2 and %q", tt.args, code, errs, tt.want)
			}
		})
	}
	// A flag near none the command takes gets no guess.
	if _, errs, code := runIn(t, nil, "", "box", "list", "--zzzzzz"); code != 2 || strings.Contains(errs, "did you mean") {
		t.Errorf("box list --zzzzzz = %d %q, want exit 2 and no suggestion", code, errs)
	}
}

// runEnviron runs the CLI with environ as its whole environment.
func runEnviron(t *testing.T, environ []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return env[k] }, environ: func() []string { return environ }}
	code = c.main(context.Background(), args)
	return out.String(), errb.String(), code
}

func TestCLI_UnknownEnvVariableWarns(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		environ []string
		args    []string
		want    []string
	}{
		{"mistyped upstream, serve", []string{"BOXBROKER_ANTHROPIC_URI=http://127.0.0.1:1", "BOXBROKER_DATA=" + dir, "BOXBROKER_LISTEN=bad"},
			[]string{"serve"}, []string{"BOXBROKER_ANTHROPIC_URI", "did you mean BOXBROKER_ANTHROPIC_URL?"}},
		{"mistyped data, box list", []string{"BOXBROKER_DAT=" + dir},
			[]string{"box", "list"}, []string{"BOXBROKER_DAT ", "did you mean BOXBROKER_DATA?"}},
		{"near none, version", []string{"BOXBROKER_ZZZZZZZZ=1"},
			[]string{"version"}, []string{"BOXBROKER_ZZZZZZZZ is not one boxbroker reads"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, _ := runEnviron(t, tt.environ, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("boxbroker %v with %v: stderr = %q, want %q in it", tt.args, tt.environ, errs, w)
				}
			}
		})
	}
	// Known variables, and others' variables, are no warning.
	environ := []string{"BOXBROKER_DATA=" + dir, "BOXBROKER_ANTHROPIC_URL=http://127.0.0.1:1", "HOME=/nowhere", "BOXBROKERX=1"}
	if _, errs, code := runEnviron(t, environ, "version"); code != 0 || errs != "" {
		t.Errorf("version with known variables = %d %q, want exit 0 and no warning", code, errs)
	}
}

// TestCLI_KnownEnvIsWhole: every BOXBROKER_* name the code, scripts and
// docs use is one knownEnv lists, so no variable boxbroker reads is ever
// warned of as unknown.
func TestCLI_KnownEnvIsWhole(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`BOXBROKER_[A-Z0-9_]*[A-Z0-9]`)
	used := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") && filepath.Base(p) == "trial_test.go" {
			return nil // this file names mistyped variables on purpose
		}
		switch filepath.Ext(p) {
		case ".go", ".sh", ".md", ".env", ".service", "", ".yml", ".yaml":
		default:
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // a binary, such as a built boxbroker
		}
		for _, n := range name.FindAllString(string(b), -1) {
			used[n] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	known := knownEnv()
	for n, p := range used {
		if !slices.Contains(known, n) {
			t.Errorf("%s names %s, which knownEnv() does not list: add it, or boxbroker warns of it as unknown", p, n)
		}
	}
}

func TestReady_PrintsJSONLine(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"json and newline", "{\"ready\":true,\n  \"store\":\"ok\"}\n", "{\"ready\":true,\"store\":\"ok\"}\n"},
		{"plain text", "ok\n", "ok\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tt.body)) }))
			defer srv.Close()
			out, errs, code := runIn(t, nil, "", "ready", "--url", srv.URL)
			if code != 0 || out != tt.want {
				t.Errorf("ready answered %q = %d %q (stderr %q), want %q", tt.body, code, out, errs, tt.want)
			}
		})
	}
}

func TestVersion_HelpExitsZero(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		out, errs, code := runIn(t, nil, "", "version", h)
		if code != 0 || out != "" || !strings.Contains(errs, "usage: boxbroker version") {
			t.Errorf("version %s = %d %q %q, want exit 0 and its usage", h, code, out, errs)
		}
	}
	if _, _, code := runIn(t, nil, "", "version", "extra"); code != 2 {
		t.Errorf("version extra = %d, want 2", code)
	}
}

// TestCLI_DataFlagAgreesWithREADME: the commands the README says take no
// --data, the ones `boxbroker help` says, and the ones whose -h lists no
// -data are the same.
func TestCLI_DataFlagAgreesWithREADME(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	but := regexp.MustCompile(`(?s)Every command but (.*?)\s+takes\s+` + "`--data DIR`")
	m := but.FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no sentence %q", "Every command but ... takes `--data DIR`")
	}
	fromREADME := regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(string(m[1]), -1)
	var inREADME []string
	for _, n := range fromREADME {
		inREADME = append(inREADME, n[1])
	}
	_, help, _ := runIn(t, nil, "", "help")
	hm := regexp.MustCompile(`Every command but (.*?) takes --data`).FindStringSubmatch(help)
	if hm == nil {
		t.Fatalf("boxbroker help = %q, want the sentence saying which commands take no --data", help)
	}
	inHelp := regexp.MustCompile(`[a-z]+`).FindAllString(strings.ReplaceAll(hm[1], " and ", " "), -1)
	var noData []string
	for name, cmd := range commands() {
		args := []string{name}
		if len(cmd.subs) > 0 {
			args = append(args, cmd.subs[0])
		}
		_, errs, code := runIn(t, nil, "", append(args, "-h")...)
		if code != 0 {
			t.Errorf("boxbroker %v -h = %d %q, want 0", args, code, errs)
		}
		if !strings.Contains(errs, "  -data") {
			noData = append(noData, name)
		}
	}
	sort.Strings(noData)
	sort.Strings(inREADME)
	sort.Strings(inHelp)
	if !slices.Equal(inREADME, noData) {
		t.Errorf("README says every command but %v takes --data; the commands whose -h lists no -data are %v", inREADME, noData)
	}
	if !slices.Equal(inHelp, noData) {
		t.Errorf("boxbroker help says every command but %v takes --data; the commands whose -h lists no -data are %v", inHelp, noData)
	}
}
