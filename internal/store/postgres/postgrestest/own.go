package postgrestest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Own is a PostgreSQL cluster one test has to itself, on loopback, so
// that the test may stop, start and freeze it without touching the
// server other tests share (BOXBROKER_TEST_POSTGRES, or Main's cluster).
type Own struct {
	c *cluster
	// DSN connects to the cluster's postgres database.
	DSN string
}

// OwnCluster starts a cluster for t alone, stopped and removed when t
// ends. It needs initdb and pg_ctl on this machine, whatever
// BOXBROKER_TEST_POSTGRES says; without them it skips t (fails it when
// BOXBROKER_REQUIRE_POSTGRES is set).
func OwnCluster(t testing.TB) *Own {
	t.Helper()
	c, err := startCluster()
	if err != nil {
		msg := fmt.Sprintf("no PostgreSQL cluster of the test's own (%v): install PostgreSQL so that initdb and pg_ctl are in /usr/lib/postgresql/*/bin", err)
		if os.Getenv(EnvRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	o := &Own{c: c, DSN: c.dsn}
	t.Cleanup(func() {
		o.signal(syscall.SIGCONT) // a frozen cluster cannot stop
		c.stop()
	})
	return o
}

// Stop stops the server (fast shutdown: its connections are ended).
func (o *Own) Stop(t testing.TB) {
	t.Helper()
	if err := o.c.run(o.c.pgCtl, "-D", filepath.Join(o.c.dir, "data"), "-m", "fast", "-w", "stop"); err != nil {
		t.Fatal(err)
	}
}

// Start starts the stopped server again on the same port.
func (o *Own) Start(t testing.TB) {
	t.Helper()
	if err := o.c.run(o.c.pgCtl, o.c.startArgs...); err != nil {
		t.Fatal(err)
	}
}

// Freeze stops every process of the server with SIGSTOP: connections
// stay open and nothing answers, as when a server hangs.
func (o *Own) Freeze(t testing.TB) {
	t.Helper()
	if n := o.signal(syscall.SIGSTOP); n == 0 {
		t.Fatal("postgrestest: no process of the cluster to freeze")
	}
}

// Thaw resumes the processes Freeze stopped.
func (o *Own) Thaw(t testing.TB) {
	t.Helper()
	o.signal(syscall.SIGCONT)
}

// signal sends sig to the postmaster and its children, and says to how
// many processes.
func (o *Own) signal(sig syscall.Signal) int {
	b, err := os.ReadFile(filepath.Join(o.c.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pm <= 1 {
		return 0
	}
	pids := append([]int{pm}, children(pm)...)
	n := 0
	for _, pid := range pids {
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// children are the processes whose parent is pid, read from /proc.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read
		// after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if c, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, c)
		}
	}
	return out
}
