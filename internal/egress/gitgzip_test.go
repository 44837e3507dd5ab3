package egress_test

import (
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestEgress_GitFetchWithGzipRequestBody: git sends a fetch's request
// body gzip-compressed (Content-Encoding: gzip) once it is over 1 KiB, as
// it is when a clone wants many refs. Through /egress/NAME with a plain
// secret, the broker decodes it (so the token in it could be swapped and
// any other scrubbed), the smart-HTTP host receives it decoded, and the
// clone has every ref.
func TestEgress_GitFetchWithGzipRequestBody(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed; skipping the fetch through egress")
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v; skipping", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed (%v); skipping the fetch through egress", err)
	}
	root := t.TempDir()
	home := t.TempDir()
	gitEnv := append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir, cmd.Env = dir, gitEnv
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v\n%s", args, err, b)
		}
	}
	work := filepath.Join(root, "work")
	git(root, "init", "-q", work)
	// Sixty branches, each its own commit: a clone wants each, so the
	// fetch's request is well over 1 KiB.
	const branches = 60
	for i := range branches {
		if err := os.WriteFile(filepath.Join(work, "f"), []byte(fmt.Sprintf("commit %d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		git(work, "add", "f")
		git(work, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
		git(work, "branch", fmt.Sprintf("branch-with-a-long-name-%03d", i))
	}
	git(root, "clone", "-q", "--bare", work, filepath.Join(root, "owner", "repo.git"))

	const value = "git_secret_value_0123456789abcdef"
	var mu sync.Mutex
	var encodings []string
	backendHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	gitHost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != value {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			mu.Lock()
			encodings = append(encodings, r.Header.Get("Content-Encoding"))
			mu.Unlock()
		}
		backendHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(gitHost.Close)
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("shop")
	br.SetSecret("shop", "GIT", gitHost.URL, value)
	br.Report(tok, brokertest.Entry(protocol.Egress, "GIT"))

	dest := filepath.Join(t.TempDir(), "clone")
	u := strings.Replace(br.URL, "://", "://x:"+tok+"@", 1) + "/egress/GIT/owner/repo.git"
	cmd := exec.Command(gitBin, "clone", "-q", "--no-single-branch", u, dest)
	cmd.Env = gitEnv
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone through the broker: %v\n%s", err, strings.ReplaceAll(string(b), tok, "[token]"))
	}
	refs, err := exec.Command(gitBin, "-C", dest, "branch", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(refs), "branch-with-a-long-name-"); n != branches {
		t.Errorf("the clone has %d of the %d branches", n, branches)
	}
	gzipped := 0
	for _, s := range br.Front.Seen() {
		if s.Method == http.MethodPost && s.Header.Get("Content-Encoding") == "gzip" {
			gzipped++
		}
	}
	if gzipped == 0 {
		t.Fatalf("git sent no gzip request body; the test no longer makes it")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range encodings {
		if e != "" {
			t.Errorf("the host received a request body in Content-Encoding %q, want it decoded", e)
		}
	}
}
