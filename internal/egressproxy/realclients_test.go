package egressproxy_test

import (
	"bytes"
	"crypto/x509"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The tests here drive real clients through the proxy (curl, git,
// Node's fetch), each skipping with a message when the client is not
// installed. For each: the secret's host receives the value and never
// the token; the box never receives the value although the host echoes
// every header; an undeclared host gets 403; a wrong token 407; and a
// passthrough host is tunnelled untouched, so that the client, trusting
// only the host's own certificate, connects.

// certFile writes c in PEM to a file under t's temporary directory.
func certFile(t *testing.T, c *x509.Certificate) string {
	p := filepath.Join(t.TempDir(), "cert.pem")
	if err := os.WriteFile(p, caPEMOf(c), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// wrongToken is a well-formed token that is no box's.
func wrongToken(tok string) string {
	return "bbx_" + strings.Repeat("Q", len(tok)-len("bbx_"))
}

// cleanEnv is an environment with no proxy settings or user config.
func cleanEnv(t *testing.T, extra ...string) []string {
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "NO_PROXY=", "no_proxy="}
	return append(env, extra...)
}

func TestProxy_Curl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: the curl client's checks did not run")
	}
	f := newFixture(t)
	// The token goes in a config file (-K), not in argv.
	run := func(tok, cacert, url string, headers ...string) (string, string, error) {
		cfg := "proxy = \"" + f.proxyURL(tok).String() + "\"\nurl = \"" + url + "\"\n"
		for _, h := range headers {
			cfg += "header = \"" + h + "\"\n"
		}
		p := filepath.Join(t.TempDir(), "curl.cfg")
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(curl, "-sS", "-D", "-", "--cacert", cacert, "-K", p)
		cmd.Env = cleanEnv(t)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	out, stderr, err := run(f.token, f.caFile, "https://"+f.host+"/v1/echo?key="+f.token, "Authorization: Bearer "+f.token)
	if err != nil {
		t.Fatalf("curl through the proxy: %v\n%s", err, stderr)
	}
	if !strings.Contains(out, "\r\n\r\nHTTP/2 200") {
		t.Errorf("curl's answer %.80q holds no HTTP/2 200 after the CONNECT's 200 (ALPN h2 in the tunnel)", out)
	}
	if strings.Contains(out, secretValue) || !strings.Contains(out, "Bearer "+f.token) {
		t.Errorf("curl's answer carries the value, or not the echoed token:\n%s", out)
	}
	if seen := f.up.all(); !strings.Contains(seen, "Bearer "+secretValue) || strings.Contains(seen, f.token) {
		t.Errorf("the host did not receive the value, or received the token:\n%s", seen)
	}
	if _, stderr, err := run(f.token, f.caFile, "https://api.github.com/"); err == nil || !strings.Contains(stderr, "403") {
		t.Errorf("curl to an undeclared host = %v %s, want the CONNECT refused 403", err, stderr)
	}
	if _, stderr, err := run(wrongToken(f.token), f.caFile, "https://"+f.host+"/"); err == nil || !strings.Contains(stderr, "407") {
		t.Errorf("curl with a wrong token = %v %s, want 407", err, stderr)
	}
	out, stderr, err = run(f.token, certFile(t, f.passCert), "https://"+f.passHost+"/")
	if err != nil || !strings.Contains(out, "its own certificate") {
		t.Errorf("curl to the passthrough host, trusting only its certificate = %v %s %s", err, out, stderr)
	}
}

// gitRepo makes a bare repository root/owner/repo.git holding one commit,
// and returns root.
func gitRepo(t *testing.T, git string) string {
	root := t.TempDir()
	work := t.TempDir()
	env := cleanEnv(t, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for _, args := range [][]string{
		{"init", "-q", "--bare", filepath.Join(root, "owner", "repo.git")},
		{"-C", work, "init", "-q"},
		{"-C", work, "-c", "core.autocrlf=false", "commit", "-q", "--allow-empty", "-m", "first"},
		{"-C", work, "push", "-q", filepath.Join(root, "owner", "repo.git"), "HEAD:refs/heads/main"},
		{"-C", filepath.Join(root, "owner", "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main"},
	} {
		cmd := exec.Command(git, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return root
}

func TestProxy_GitClone(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: the git client's checks did not run")
	}
	out, err := exec.Command(git, "--exec-path").Output()
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, serr := os.Stat(backend); err != nil || serr != nil {
		t.Skip("git-http-backend is not installed: the git client's checks did not run")
	}
	root := gitRepo(t, git)
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	f := newFixtureWith(t, h)
	clone := func(tok, cainfo, url string) (string, error) {
		dst := filepath.Join(t.TempDir(), "clone")
		cmd := exec.Command(git, "clone", "-q", url, dst)
		cmd.Env = cleanEnv(t,
			"HTTPS_PROXY="+f.proxyURL(tok).String(),
			"GIT_SSL_CAINFO="+cainfo,
			"GIT_TRACE_CURL=1", "GIT_TRACE_CURL_NO_DATA=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Bearer "+tok)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		return errb.String(), err
	}
	trace, err := clone(f.token, f.caFile, "https://"+f.host+"/owner/repo.git")
	if err != nil {
		t.Fatalf("git clone through the proxy: %v\n%s", err, tail(trace))
	}
	if seen := f.up.all(); !strings.Contains(seen, "Bearer "+secretValue) || strings.Contains(seen, f.token) {
		t.Errorf("the git host did not receive the value, or received the token:\n%s", seen)
	}
	if strings.Contains(trace, secretValue) {
		t.Errorf("git's trace of the answers carries the value")
	}
	if !strings.Contains(strings.ToLower(trace), "x-echo-authorization: bearer "+strings.ToLower(f.token)) {
		t.Errorf("git's trace does not show the echoed header with the token in the value's place:\n%s", tail(trace))
	}
	if trace, err := clone(f.token, f.caFile, "https://api.github.com/owner/repo.git"); err == nil || !strings.Contains(trace, "403") {
		t.Errorf("git clone from an undeclared host = %v, want the CONNECT refused 403:\n%s", err, tail(trace))
	}
	if trace, err := clone(wrongToken(f.token), f.caFile, "https://"+f.host+"/owner/repo.git"); err == nil || !strings.Contains(trace, "407") {
		t.Errorf("git clone with a wrong token = %v, want 407:\n%s", err, tail(trace))
	}
	if trace, err := clone(f.token, certFile(t, f.passCert), "https://"+f.passHost+"/owner/repo.git"); err != nil {
		t.Errorf("git clone from the passthrough host, trusting only its certificate: %v\n%s", err, tail(trace))
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
