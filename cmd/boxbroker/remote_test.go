package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// runEnv runs the CLI with args, env and stdin, and returns its exit status,
// stdout and stderr.
func runEnv(t *testing.T, env map[string]string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	code := c.main(context.Background(), args)
	return code, out.String(), errb.String()
}

func TestCLI_ThroughTheAdminAPI(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	data := b.Server.Config.DataDir

	// The first admin token is made where the store is.
	code, out, errs := runEnv(t, map[string]string{"BOXBROKER_DATA": data}, "", "admin", "token", "--name", "ci")
	if code != 0 {
		t.Fatalf("admin token = %d: %s", code, errs)
	}
	token := strings.TrimSpace(out)
	if !strings.HasPrefix(token, "bba_") || strings.Contains(errs, token) {
		t.Fatalf("admin token printed %q (stderr %q), want the token on stdout alone", out, errs)
	}
	env := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": token, "BOXBROKER_DATA": t.TempDir()}

	code, out, errs = runEnv(t, env, "", "box", "add", "alpha")
	if code != 0 {
		t.Fatalf("box add alpha = %d: %s", code, errs)
	}
	boxToken := strings.TrimSpace(out)
	b.Report(boxToken, brokertest.Entry("inference", "agent"))

	code, out, errs = runEnv(t, env, "", "box", "list")
	if code != 0 || !strings.Contains(out, "alpha") || strings.Contains(out, "never") {
		t.Errorf("box list = %d %q %q, want alpha, reported", code, out, errs)
	}

	code, out, errs = runEnv(t, env, "sk-ant-api03-from-stdin\n", "credential", "set", "anthropic")
	if code != 0 || strings.Contains(out+errs, "sk-ant-api03-from-stdin") {
		t.Errorf("credential set = %d %q %q, want done without echoing the value", code, out, errs)
	}
	if r := b.Do("POST", "/llm/anthropic/v1/messages", boxToken, []byte(`{"model":"m","max_tokens":1,"messages":[]}`), nil); r.StatusCode != 200 {
		t.Errorf("messages with the credential set through the CLI = %d %s", r.StatusCode, r.Body)
	}
	code, out, _ = runEnv(t, env, "", "credential", "list")
	if code != 0 || !strings.Contains(out, "anthropic") {
		t.Errorf("credential list = %d %q, want anthropic", code, out)
	}
	if code, _, errs = runEnv(t, env, "", "credential", "remove", "--yes", "anthropic"); code != 0 {
		t.Errorf("credential remove = %d %s", code, errs)
	}

	code, out, errs = runEnv(t, env, "", "box", "rotate", "alpha")
	if code != 0 || strings.TrimSpace(out) == boxToken {
		t.Errorf("box rotate = %d %q %q, want a new token", code, out, errs)
	}
	if code, _, _ = runEnv(t, env, "n\n", "box", "remove", "alpha"); code == 0 {
		t.Errorf("box remove answered no = 0, want refused")
	}
	if code, _, errs = runEnv(t, env, "", "box", "remove", "--yes", "alpha"); code != 0 {
		t.Errorf("box remove --yes = %d %s", code, errs)
	}
	code, _, errs = runEnv(t, env, "", "box", "remove", "--yes", "alpha")
	if code != 1 || !strings.Contains(errs, "no box named alpha") || !strings.Contains(errs, "`boxbroker box list`") {
		t.Errorf("box remove of a removed box = %d %q, want 1 naming it", code, errs)
	}

	bad := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": "bba_wrong"}
	code, _, errs = runEnv(t, bad, "", "box", "list")
	if code != 1 || !strings.Contains(errs, "401") || strings.Contains(errs, "bba_wrong") {
		t.Errorf("box list with a wrong admin token = %d %q, want 1 with a 401 and no token", code, errs)
	}
	code, _, errs = runEnv(t, map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL}, "", "box", "list")
	if code != 1 || !strings.Contains(errs, "BOXBROKER_ADMIN_TOKEN") {
		t.Errorf("box list with no admin token = %d %q, want 1 naming BOXBROKER_ADMIN_TOKEN", code, errs)
	}
}

func TestCLI_Audit(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference"))
	if r := b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(`{}`), nil); r.StatusCode != 403 {
		t.Fatalf("messages without agent = %d", r.StatusCode)
	}
	if err := b.Server.Audit.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	envs := storeAndAdminAPI(t, b)
	for _, tt := range envs {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, "", "audit", "alpha", "--since", "1h")
			if code != 0 {
				t.Fatalf("audit alpha --since 1h = %d: %s", code, errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 3 || !strings.Contains(lines[1], "declaration") || !strings.Contains(lines[1], "does not list agent") || !strings.Contains(lines[2], "/api/box/declaration") {
				t.Errorf("audit alpha --since 1h printed:\n%s\nwant a header, the refusal, the report", out)
			}
			if strings.Contains(out, tok) {
				t.Errorf("audit printed the box's token")
			}
			if !strings.Contains(strings.Join(strings.Fields(lines[0]), " "), "MS BYTES COST REFUSAL") {
				t.Errorf("audit's header = %q, want the bytes and cost of each entry after its duration", lines[0])
			}
			code, out, _ = runEnv(t, tt.env, "", "audit", "--refusals", "alpha")
			if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 1 {
				t.Errorf("audit --refusals alpha = %d:\n%s\nwant the one refusal", code, out)
			}
		})
	}
	if code, _, _ := runEnv(t, envs[0].env, "", "audit", "alpha", "--since", "yesterday"); code != 2 {
		t.Errorf("audit --since yesterday = %d, want 2", code)
	}
}

// cliEnv is a name for a way the CLI reaches the broker, and the
// environment that makes it go that way.
type cliEnv struct {
	name string
	env  map[string]string
}

// storeAndAdminAPI are the two ways the CLI reaches b: its store
// (BOXBROKER_DATA), and its admin API (with a data directory of its own,
// so that nothing is read from b's).
func storeAndAdminAPI(t *testing.T, b *brokertest.Broker) []cliEnv {
	return []cliEnv{
		{"store", map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}},
		{"admin API", map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}},
	}
}
