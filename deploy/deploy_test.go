package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSystemdUnit_Verifies checks deploy/boxbroker.service with
// systemd-analyze verify, where that command exists, and that it keeps the
// hardening the README promises. ExecStart is pointed at an executable
// that exists here, since verify checks that it does.
func TestSystemdUnit_Verifies(t *testing.T) {
	unit, err := os.ReadFile("boxbroker.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"User=boxbroker", "StateDirectory=boxbroker", "EnvironmentFile=/etc/boxbroker/boxbroker.env",
		"ExecStart=/usr/local/bin/boxbroker serve", "NoNewPrivileges=yes", "ProtectSystem=strict",
		"PrivateTmp=yes", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("boxbroker.service has no %q", strings.TrimSpace(want))
		}
	}
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here (it comes with systemd), so the unit is not verified")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "boxbroker.service")
	checked := bytes.Replace(unit, []byte("ExecStart=/usr/local/bin/boxbroker"), []byte("ExecStart="+exe), 1)
	if err := os.WriteFile(path, checked, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tool, "verify", path).CombinedOutput()
	// verify exits 0 on warnings it ignores (an unknown key, a bad
	// boolean), so any line about the unit is a failure too.
	var about []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, path) {
			about = append(about, l)
		}
	}
	if err != nil || len(about) > 0 {
		t.Errorf("systemd-analyze verify boxbroker.service: %v\n%s", err, out)
	}
}

// engine finds a container builder that works here: docker or podman
// whose engine answers, or buildah. It returns the command and the
// arguments that build a tagged image from a context directory, or why
// there is none.
func engine(t *testing.T) (build func(tag, dir string) *exec.Cmd, run func(args ...string) *exec.Cmd, remove func(tag string), why string) {
	t.Helper()
	var reasons []string
	for _, name := range []string{"docker", "podman", "nerdctl"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, "info").CombinedOutput()
		cancel()
		if err != nil {
			last := strings.TrimSpace(string(out))
			if i := strings.LastIndex(last, "\n"); i >= 0 {
				last = last[i+1:]
			}
			reasons = append(reasons, fmt.Sprintf("%s is installed but its engine does not answer (%s info: %s)", name, name, last))
			continue
		}
		return func(tag, dir string) *exec.Cmd { return exec.Command(bin, "build", "-t", tag, dir) },
			func(args ...string) *exec.Cmd { return exec.Command(bin, append([]string{"run", "--rm"}, args...)...) },
			func(tag string) { _ = exec.Command(bin, "rmi", "-f", tag).Run() }, ""
	}
	if bin, err := exec.LookPath("buildah"); err == nil {
		return func(tag, dir string) *exec.Cmd { return exec.Command(bin, "bud", "-t", tag, dir) },
			nil, func(tag string) { _ = exec.Command(bin, "rmi", "-f", tag).Run() }, ""
	}
	if len(reasons) == 0 {
		reasons = append(reasons, "none of docker, podman, nerdctl or buildah is installed")
	}
	return nil, nil, nil, strings.Join(reasons, "; ")
}

// TestDockerfile_Builds builds the repository's Dockerfile with whatever
// container builder the machine has and runs `boxbroker version` in the
// image. Where there is none it skips, saying so, and that skip is never
// a failure, BOXBROKER_REQUIRE_NETWORK or not: CI machines have no
// container engine either. What the Dockerfile must hold is checked
// everywhere.
func TestDockerfile_Builds(t *testing.T) {
	df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "ca-certificates.crt", "USER 65532:65532", "VOLUME /data", "BOXBROKER_DATA=/data",
		`CMD ["/usr/local/bin/boxbroker", "ready"]`} { // the HEALTHCHECK: boxbroker ready asks /readyz
		if !bytes.Contains(df, []byte(want)) {
			t.Errorf("Dockerfile has no %q", want)
		}
	}
	// .git stays in the build context, so the binary records its revision.
	ignore, err := os.ReadFile(filepath.Join("..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(ignore), "\n") {
		if l = strings.TrimSpace(l); l == ".git" || l == "/.git" || l == ".git/" {
			t.Errorf(".dockerignore leaves out %s, so boxbroker version in the image names no revision", l)
		}
	}
	build, run, remove, why := engine(t)
	if build == nil {
		t.Skipf("no container engine here, so the image is not built: %s", why)
	}
	if testing.Short() {
		t.Skip("building the image takes minutes")
	}
	b := make([]byte, 4)
	rand.Read(b)
	tag := fmt.Sprintf("boxbroker-test:%x", b)
	defer remove(tag)
	if out, err := build(tag, "..").CombinedOutput(); err != nil {
		t.Fatalf("build the image: %v\n%s", err, out)
	}
	if run == nil {
		return
	}
	out, err := run(tag, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "boxbroker ") {
		t.Errorf("boxbroker version in the image = %q, %v", out, err)
	}
	out, err = run(tag, "box", "list").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no boxbroker data at /data") {
		t.Errorf("box list in a fresh image = %q, %v; want it to say /data holds no data yet", out, err)
	}
}
