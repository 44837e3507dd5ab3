package e2e

import (
	"bufio"
	"context"
	"encoding/json"
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

// npmInstall makes sure dir/node_modules holds what dir/package-lock.json
// pins, running `npm ci` there when it does not (a clean clone).
var npmMu sync.Mutex // one npm at a time: they share the cache

func npmInstall(t *testing.T, dir string, marker string) {
	t.Helper()
	npmMu.Lock()
	defer npmMu.Unlock()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", marker)); err == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", marker)); err != nil {
		t.Fatalf("npm ci in %s left no node_modules/%s", dir, marker)
	}
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
