package egress_test

import (
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intentius/boxbroker/internal/mint"
)

// TestMint_GitCloneThroughGitHubApp: git clone <broker>/egress/GITHUB/
// owner/repo.git, with the box's token as the password, reaches a
// smart-HTTP stand-in (git http-backend) that takes only an installation
// token the broker minted.
func TestMint_GitCloneThroughGitHubApp(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed; skipping the clone through egress")
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v; skipping", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed (%v); skipping the clone through egress", err)
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
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("through the broker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "first")
	git(root, "clone", "-q", "--bare", work, filepath.Join(root, "owner", "repo.git"))

	key, pemKey := testKey(t)
	var e *mintEnv
	var refuse atomic.Bool
	backendHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	e = newMintEnvHost(t, githubStandIn(t, &e, &key.PublicKey, &refuse), func(w http.ResponseWriter, r *http.Request) {
		_, pass, ok := r.BasicAuth()
		if !ok || !e.issued.valid(pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backendHandler.ServeHTTP(w, r)
	})
	e.set(t, "GITHUB", mint.KindGitHubApp, map[string]any{
		"app_id": "1234", "installation_id": 42, "private_key": pemKey, "api_url": e.mintAt.URL,
	})
	dest := filepath.Join(t.TempDir(), "clone")
	u := strings.Replace(e.br.URL, "://", "://x-access-token:"+e.token+"@", 1) + "/egress/GITHUB/owner/repo.git"
	cmd := exec.Command(gitBin, "clone", "-q", u, dest)
	cmd.Env = gitEnv
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone through the broker: %v\n%s", err, strings.ReplaceAll(string(b), e.token, "[token]"))
	}
	got, err := os.ReadFile(filepath.Join(dest, "README"))
	if err != nil || string(got) != "through the broker\n" {
		t.Errorf("cloned README = %q, %v; want the commit's", got, err)
	}
	if n := e.issued.n.Load(); n != 1 {
		t.Errorf("mints for one clone = %d, want 1", n)
	}
}
