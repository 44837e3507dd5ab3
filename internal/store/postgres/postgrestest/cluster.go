package postgrestest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cluster is a throwaway PostgreSQL cluster in a temporary directory,
// listening on a loopback port only, with trust authentication.
type cluster struct {
	dir   string   // the temporary directory: data/, the log, the socket
	pgCtl string   // path of pg_ctl
	runAs []string // the command prefix that runs as the cluster's owner
	dsn   string
	// startArgs are pg_ctl's arguments that started the cluster, to
	// start it again on the same port.
	startArgs []string
}

// startCluster starts a cluster with the newest initdb and pg_ctl found in
// /usr/lib/postgresql/*/bin or on PATH. Run as root, it runs them as the
// postgres user, since initdb refuses root.
func startCluster() (*cluster, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "boxbroker-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, pgCtl: filepath.Join(bin, "pg_ctl")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("running as root and there is no postgres user to run initdb as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("running as root and runuser is missing")
		}
		c.runAs = []string{runuser, "-u", "postgres", "--"}
	}

	data := filepath.Join(dir, "data")
	if err := c.run(filepath.Join(bin, "initdb"), "-D", data, "-U", "boxbroker", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// A free port can be taken between choosing and listening: try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			break
		}
		opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off", port, dir)
		c.startArgs = []string{"-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", opts, "start"}
		err = c.run(c.pgCtl, c.startArgs...)
		if err == nil {
			c.dsn = fmt.Sprintf("postgres://boxbroker@127.0.0.1:%d/postgres?sslmode=disable", port)
			return c, nil
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	os.RemoveAll(dir)
	return nil, fmt.Errorf("pg_ctl start failed: %s", strings.TrimSpace(string(log)))
}

// stop stops the cluster at once and removes its directory.
func (c *cluster) stop() {
	c.run(c.pgCtl, "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop") //nolint:errcheck // removed next anyway
	os.RemoveAll(c.dir)
}

// run runs a PostgreSQL program as the cluster's owner.
func (c *cluster) run(name string, args ...string) error {
	argv := append(append([]string{}, c.runAs...), name)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(name), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// postgresBin is the directory of the newest initdb and pg_ctl installed.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("initdb and pg_ctl not found")
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
