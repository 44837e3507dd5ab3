package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// installTimeout bounds an npm install; runTimeout bounds one run of a
// Node.js client. Both only keep a wedged process from hanging the suite.
const (
	installTimeout = 10 * time.Minute
	runTimeout     = 3 * time.Minute
)

// needNode skips the test, saying why, when node or npm is not on PATH.
// Everywhere else (CI included) the test runs.
func needNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH, so this client cannot run here: install Node.js 20 or later (with npm) to run it", tool)
		}
	}
}

// npmInstall makes sure the Node.js packages dir/package-lock.json pins
// are installed, and returns the directory that holds them: outside the
// checkout, in $BOXBROKER_E2E_CACHE or the user's cache directory
// (~/.cache/boxbroker-e2e), under a name that changes with the lock file.
// No test writes node_modules into the source tree.
//
// Installing (npm ci) needs the network and takes a while, so the default
// ./test.sh uses what an earlier full run installed, and skips, saying so,
// when nothing is installed; BOXBROKER_FULL=1 (.ci/run) installs. Where
// npm cannot reach its registry the test skips, saying the network is
// missing, unless BOXBROKER_REQUIRE_NETWORK=1 (CI), which makes that a
// failure.
var npmMu sync.Mutex // one npm at a time: they share the cache

func npmInstall(t *testing.T, dir string, marker string) string {
	t.Helper()
	npmMu.Lock()
	defer npmMu.Unlock()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	root := os.Getenv("BOXBROKER_E2E_CACHE")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory to install the pinned Node.js packages into (%v): set BOXBROKER_E2E_CACHE", err)
		}
		root = filepath.Join(cache, "boxbroker-e2e")
	}
	into := filepath.Join(root, fmt.Sprintf("%s-%x", filepath.Base(dir), sum[:6]))
	// The sources are copied each time, so the installed tree runs the
	// checkout's scripts.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(into, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(into, "node_modules", marker)); err == nil {
		return into
	}
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skipf("the Node.js packages e2e/%s/package-lock.json pins are not installed in %s: `BOXBROKER_FULL=1 ./test.sh` installs them (npm ci, which needs the network) and later runs use them", dir, into)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = into
	out, err := cmd.CombinedOutput()
	if err != nil {
		if offline(out) {
			needNetwork(t, "npm ci in %s could not reach the npm registry, so %s cannot be installed: %v\n%s", into, marker, err, out)
		}
		t.Fatalf("npm ci in %s: %v\n%s", into, err, out)
	}
	if _, err := os.Stat(filepath.Join(into, "node_modules", marker)); err != nil {
		t.Fatalf("npm ci in %s left no node_modules/%s", into, marker)
	}
	return into
}

// offline reports whether npm's output says it could not reach the
// network, rather than failing for another reason.
func offline(out []byte) bool {
	for _, s := range []string{"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH", "getaddrinfo", "network"} {
		if bytes.Contains(out, []byte(s)) {
			return true
		}
	}
	return false
}

// needNetwork skips a test whose dependency needs the network, saying so;
// with BOXBROKER_REQUIRE_NETWORK=1 (CI) it fails instead.
func needNetwork(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("BOXBROKER_REQUIRE_NETWORK") == "1" {
		t.Fatalf("BOXBROKER_REQUIRE_NETWORK=1, and the network is missing: "+format, args...)
	}
	t.Skipf("no network: "+format, args...)
}

// line is one JSON object a Node.js client printed.
type line map[string]json.RawMessage

func (l line) str(key string) string {
	var s string
	_ = json.Unmarshal(l[key], &s)
	return s
}

// readLines decodes one JSON object a line from r, calling each for every
// line as it arrives, and returns them all.
func readLines(t *testing.T, r io.Reader, each func(line)) []line {
	t.Helper()
	var all []line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("a line the client printed is not JSON: %q", sc.Text())
			continue
		}
		if each != nil {
			each(l)
		}
		all = append(all, l)
	}
	return all
}

// cleanEnv is the environment a Node.js client runs with: PATH, a fresh
// HOME, and the given variables; nothing of the test's own environment
// (no ANTHROPIC_* variables from the developer's shell).
func cleanEnv(t *testing.T, vars ...string) []string {
	t.Helper()
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, vars...)
}
