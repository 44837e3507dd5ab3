package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// TestReady_NothingListeningSaysWhatToCheck: `ready` with no serve at
// its address says so and how to name the address serve printed.
func TestReady_NothingListeningSaysWhatToCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, tt := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"ready", "--url", "http://" + addr}},
		{map[string]string{"BOXBROKER_LISTEN": addr}, []string{"ready"}},
	} {
		_, errs, code := runIn(t, tt.env, "", tt.args...)
		if code != 1 || !strings.Contains(errs, "no broker answered at http://"+addr) || !strings.Contains(errs, "is `boxbroker serve` running there?") || !strings.Contains(errs, "--url") {
			t.Errorf("boxbroker %q with nothing at %s = %d %q, want exit 1 saying no broker answered there and naming --url", tt.args, addr, code, errs)
		}
	}
}

// TestCLI_HintsFollowBOXBROKER_LISTEN: with BOXBROKER_LISTEN set for
// serve and no BOXBROKER_URL, box add and secret set name the address
// serve listens on in what to give the box, as ready asks it there;
// BOXBROKER_URL still wins, and with neither the default stays.
func TestCLI_HintsFollowBOXBROKER_LISTEN(t *testing.T) {
	const value = "sk_test_HINTSFOLLOWLISTEN"
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"listen", map[string]string{"BOXBROKER_LISTEN": "127.0.0.1:28787"}, "http://127.0.0.1:28787"},
		{"wildcard listen", map[string]string{"BOXBROKER_LISTEN": "0.0.0.0:28787"}, "http://127.0.0.1:28787"},
		{"url wins", map[string]string{"BOXBROKER_LISTEN": "127.0.0.1:28787", "BOXBROKER_URL": "https://broker.example"}, "https://broker.example"},
		{"neither", map[string]string{}, "http://127.0.0.1:8787"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["BOXBROKER_DATA"] = t.TempDir()
			_, errs, code := runIn(t, tt.env, "", "box", "add", "salad")
			if code != 0 || !strings.Contains(errs, "STUDIO_URL="+tt.want+"\n") || !strings.Contains(errs, "ANTHROPIC_BASE_URL="+tt.want+"/llm/anthropic") {
				t.Errorf("box add with %v = %d %q, want the box's environment at %s", tt.env, code, errs, tt.want)
			}
			out, errs, code := runIn(t, tt.env, value, "secret", "set", "salad", "STRIPE", "--host", "https://api.stripe.com")
			if code != 0 || !strings.Contains(out, "STRIPE_BASE_URL="+tt.want+"/egress/STRIPE") {
				t.Errorf("secret set with %v = %d %q %q, want the base URL at %s", tt.env, code, out, errs, tt.want)
			}
		})
	}
}

// TestCredentialSet_EmptyPipeSaysItWasEmpty: the quick start's
// `printf %s "$ANTHROPIC_API_KEY" | boxbroker credential set anthropic`
// with the variable unset pipes in nothing; the error says what it read
// was empty, not only to pipe it in.
func TestCredentialSet_EmptyPipeSaysItWasEmpty(t *testing.T) {
	for _, in := range []string{"", "\n"} {
		_, errs, code := run(t, t.TempDir(), in, "credential", "set", "anthropic")
		if code != 1 || !strings.Contains(errs, "no value on stdin") || !strings.Contains(errs, "was empty") || !strings.Contains(errs, "unset or empty") {
			t.Errorf("credential set anthropic with %q on stdin = %d %q, want exit 1 saying it was empty, as an unset variable is", in, code, errs)
		}
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

// quickStart returns the README's quick start: the text under its
// heading up to the next, and its shell block.
func quickStart(t *testing.T) (section, script string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "\n## Quick start\n")
	if i < 0 {
		t.Fatal("README.md has no ## Quick start")
	}
	if first := strings.Index(readme, "\n## "); first != i {
		t.Errorf("README.md's first section is %q, want the quick start", readme[first+1:first+1+strings.IndexByte(readme[first+1:], '\n')])
	}
	section = readme[i+1:]
	section = section[:strings.Index(section, "\n## ")]
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("README.md's quick start has no sh block")
	}
	return section, m[1]
}

// TestREADME_QuickStartIsOneFlow: the README's first section is the quick
// start, one flow on one data directory with one serve (a second on the
// same ports fails with "address already in use"), saying the first
// build takes minutes, with --anthropic-url and admin token in it; the
// test suite's internals come after it.
func TestREADME_QuickStartIsOneFlow(t *testing.T) {
	section, script := quickStart(t)
	if n := len(regexp.MustCompile(`(?m)^\./boxbroker serve\b`).FindAllString(script, -1)); n != 1 {
		t.Errorf("the quick start runs serve %d times, want once", n)
	}
	if n := strings.Count(script, "BOXBROKER_DATA="); n != 1 || strings.Contains(script, "--data") {
		t.Errorf("the quick start sets BOXBROKER_DATA %d times (or uses --data), want one data directory for every step", n)
	}
	for _, want := range []string{"--anthropic-url", "admin token", "box add", "credential set anthropic", "kill %1"} {
		if !strings.Contains(script, want) {
			t.Errorf("the quick start's commands lack %q", want)
		}
	}
	for _, want := range []string{"a few minutes", "go: downloading", "stop an earlier one first"} {
		if !strings.Contains(section, want) {
			t.Errorf("the quick start does not say %q", want)
		}
	}
	b, _ := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if strings.Index(string(b), "### What `./test.sh` runs") < strings.Index(string(b), "## Quick start") {
		t.Errorf("README.md tells what ./test.sh runs before the quick start")
	}
}

// TestREADME_QuickStartRuns runs the README's quick start as written, with
// bash and curl, against a stand-in Anthropic API (its URL put in for
// --anthropic-url's) on ports of its own (put in for 8787 and 8788), and
// checks each step did what its comment says.
func TestREADME_QuickStartRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds boxbroker and runs the quick start's shell")
	}
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: the README's quick start is not run", tool)
		}
	}
	_, script := quickStart(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "sk-ant-api03-QUICKSTART" {
			http.Error(w, `{"type":"error","error":{"type":"authentication_error","message":"no"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_qs","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello from the stand-in"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":6}}`)
	}))
	defer up.Close()
	port := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	}
	boxPort, adminPort := port(), port()

	dir := t.TempDir()
	// The build is the quick start's first line, run here once with the
	// test's toolchain; the rest is run as written.
	build, rest, ok := strings.Cut(script, "\n")
	if !strings.HasPrefix(build, "go build -o boxbroker ./cmd/boxbroker") || !ok {
		t.Fatalf("the quick start begins %q, want go build -o boxbroker ./cmd/boxbroker", build)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "boxbroker"), ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	rest = strings.NewReplacer("8787", boxPort, "8788", adminPort, "https://api.anthropic.com", up.URL).Replace(rest)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", rest)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_API_KEY=sk-ant-api03-QUICKSTART",
		"BOXBROKER_LISTEN=127.0.0.1:" + boxPort, "BOXBROKER_ADMIN_LISTEN=127.0.0.1:" + adminPort}
	// The script and all it starts are a process group of their own, ended
	// whatever the script left running (a serve it did not stop).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Start()
	if err == nil {
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(90 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	if err != nil {
		t.Fatalf("the quick start failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"data: " + filepath.Join(home, ".local/share/boxbroker-quickstart"), // serve, on the one data directory
		"anthropic upstream: " + up.URL,
		`{"disk":"ok","ready":true,"store":"ok"}` + "\n", // ready: one line of JSON
		"bba_",                             // admin token
		`"scope":["agent"]`,                // the declaration kept
		`"text":"Hello from the stand-in"`, // the Messages call, through the broker
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the quick start's output lacks %q; it printed:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "address already in use") || !strings.Contains(stderr.String(), "stopping") {
		t.Errorf("the quick start's serve did not run once and stop; stderr:\n%s", stderr.String())
	}
}
