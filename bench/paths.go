package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	boxclient "github.com/intentius/boxbroker/client"
)

// A path is one way to the stand-in upstream: direct, or via a proxy.
type path struct {
	name string
	// base is the URL the client calls (Messages is base+"/v1/messages").
	base string
	// key is what the client sends as x-api-key: the credential on the
	// direct path and to Portkey (which holds no key of its own), the
	// box's token to nginx and boxbroker.
	key string
	// header is sent with every request besides the key (Portkey's
	// provider and custom host).
	header http.Header
	// tls, when set, is the client's TLS configuration (the direct path
	// calls the HTTPS stand-in); h2 asks for HTTP/2 over it.
	tls *tls.Config
	h2  bool
	// egressURL is a GET at the third-party API, and egressKey the
	// bearer the client sends it with (the secret direct, the box's
	// token through a proxy); empty where the path has no egress.
	egressURL, egressKey string
	// idleKeys are the keys idle streams take turns with: many boxes, as
	// thousands of streams come from many boxes, each under the broker's
	// default bound on one box's requests in flight.
	idleKeys []string
	// fdsPerStream is how many descriptors one idle stream costs the
	// proxy: two (the box's connection and the upstream's) over
	// HTTP/1.1, one where streams share HTTP/2 connections upstream.
	fdsPerStream int
	// h1, when set, is this path reaching the upstream over HTTP/1.1 (for
	// the cases that ask for it); nil when the path always does.
	h1 *path
	// proc is the proxy's processes; zero for the direct path.
	proc procs
}

func (p *path) messages() string { return p.base + "/v1/messages" }

// dieWithUs asks the kernel to end cmd when the harness ends, however it
// ends, so no process outlives a run.
func dieWithUs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// child is a process the harness started, ended by its own pid.
type child struct {
	name string
	cmd  *exec.Cmd
}

// stop ends the child: SIGTERM, then SIGKILL after a grace.
func (c *child) stop() {
	if c == nil || c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// startUpstream writes the run's certificates into dir and starts the
// stand-in upstream process; it returns its HTTPS addresses, the one
// offering HTTP/2 and HTTP/1.1 and the one offering HTTP/1.1 only.
func startUpstream(ctx context.Context, dir string, o *options) (*child, string, string, error) {
	var err error
	o.certs, err = writeCerts(dir, net.ParseIP(o.upstreamIP))
	if err != nil {
		return nil, "", "", fmt.Errorf("certificates: %w", err)
	}
	c, addrs, err := startRole(ctx, "upstream", nil, []string{o.credential, o.egressSecret},
		"-listen-h2", o.upstreamIP+":0", "-listen-h1", o.upstreamIP+":0", "-cert", o.certs.cert, "-key", o.certs.key,
		"-events", fmt.Sprint(o.events), "-gap", o.gap.String(), "-ping", o.ping.String())
	if err != nil {
		return nil, "", "", err
	}
	if len(addrs) != 2 {
		c.stop()
		return nil, "", "", fmt.Errorf("upstream did not start: it listens on %q, want two addresses", addrs)
	}
	return c, addrs[0], addrs[1], nil
}

// startRole starts the harness's own binary again as role (-role role,
// then args) with env (nil: ours), writes lines to its stdin, one a
// line, ended by an empty line, and returns it with the addresses its
// first line, "LISTEN addr...", names. Its stdin stays open for its
// life: it closes when we exit, and the child ends then (serveUntilGone).
// Secrets reach it that way, never through argv.
func startRole(ctx context.Context, role string, env, lines []string, args ...string) (*child, []string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"-role", role}, args...)...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	c, line, err := spawn(cmd, role, func() error {
		_, err := io.WriteString(stdin, strings.Join(lines, "\n")+"\n\n")
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	addrs, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if !ok {
		c.stop()
		return nil, nil, fmt.Errorf("%s did not start: %q", role, line)
	}
	return c, strings.Fields(addrs), nil
}

// spawn starts cmd, ended with the harness however it ends, runs
// started (if not nil) once it has, and returns it as a child with the
// first line it prints (where it listens); the rest of its output is read
// and dropped.
func spawn(cmd *exec.Cmd, name string, started func() error) (*child, string, error) {
	dieWithUs(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	c := &child{name: name, cmd: cmd}
	if started != nil {
		if err := started(); err != nil {
			c.stop()
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
	}
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil {
		c.stop()
		return nil, "", fmt.Errorf("%s did not start: %q %v", name, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	return c, line, nil
}

// startBroker builds nothing: bin is a boxbroker binary. It enrols the
// boxes in dataDir (once), sets the credential and the egress secret,
// copies dataDir to dataDir+"-copy" for a second broker (once),
// serves on ip:0 against upstream (an https:// URL, trusted through
// SSL_CERT_FILE set to the run's CA), and reports each box's declaration.
// tag names its log file.
func startBroker(ctx context.Context, bin, dataDir, ip, upstream string, o *options, tag string) (*child, *path, error) {
	base := append(os.Environ(), "BOXBROKER_DATA="+dataDir)
	if o.token == "" {
		// Each step runs a subcommand with stdin and keeps its output.
		type step struct {
			out   *string
			stdin string
			args  []string
		}
		var unused string
		steps := []step{
			{&o.token, "", []string{"box", "add", "bench"}},
			{&o.refusedToken, "", []string{"box", "add", "refused"}},
			{&unused, o.credential, []string{"credential", "set", "anthropic"}},
			{&unused, o.egressSecret, []string{"secret", "set", "bench", "GITHUB", "--host", o.egressHost}},
		}
		o.idleTokens = make([]string, idleBoxes)
		for i := range o.idleTokens {
			steps = append(steps, step{&o.idleTokens[i], "", []string{"box", "add", fmt.Sprintf("idle-%02d", i)}})
		}
		for _, st := range steps {
			var err error
			if *st.out, err = runCLI(ctx, bin, base, st.stdin, st.args...); err != nil {
				return nil, nil, err
			}
		}
		// A second broker (the h1 one) cannot share dataDir while this
		// one serves it: it gets a copy, made while no process holds it.
		if err := copyDir(dataDir+"-copy", dataDir); err != nil {
			return nil, nil, err
		}
	}
	logf, err := os.Create(filepath.Join(filepath.Dir(dataDir), "boxbroker-"+tag+".log"))
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	args := []string{"serve", "--listen", ip + ":0", "--anthropic-url", upstream, "--log-level", o.brokerLog}
	if hasFlag(ctx, bin, "admin-listen") {
		// Its own admin port, so two brokers can run side by side.
		args = append(args, "--admin-listen", ip+":0")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(base, "SSL_CERT_FILE="+o.certs.ca)
	cmd.Stderr = logf
	c, line, err := spawn(cmd, "boxbroker", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%v (log: %s)", err, logf.Name())
	}
	i := strings.Index(line, "http://")
	if i < 0 {
		c.stop()
		return nil, nil, fmt.Errorf("boxbroker did not start: %q (log: %s)", line, logf.Name())
	}
	url := strings.TrimSpace(line[i:])
	type boxReport struct {
		token string
		words []string
	}
	reports := []boxReport{{o.token, []string{"agent", "decide"}}, {o.refusedToken, []string{"decide"}}}
	for _, t := range o.idleTokens {
		reports = append(reports, boxReport{t, []string{"agent"}})
	}
	for _, b := range reports {
		if err := report(ctx, url, b.token, b.words...); err != nil {
			c.stop()
			return nil, nil, err
		}
	}
	return c, boxPath("boxbroker", url, upstream, o, cmd.Process.Pid), nil
}

// boxPath is the path, named name, of a proxy at url that serves the
// box's routes (boxbroker, the floor, nginx) over upstream, its process
// pid: an idle stream holds one descriptor where the upstream is HTTP/2
// (one connection for all), two otherwise.
func boxPath(name, url, upstream string, o *options, pid int) *path {
	fds := 2
	if strings.HasPrefix(upstream, "https://"+o.h2Addr) {
		fds = 1
	}
	return &path{
		name: name, base: url + "/llm/anthropic", key: o.token,
		egressURL: url + "/egress/GITHUB/repos/octocat/hello-world", egressKey: o.token,
		idleKeys: o.idleTokens, fdsPerStream: fds,
		proc: procs{pid: pid},
	}
}

// idleBoxes is how many boxes the idle streams come from.
const idleBoxes = 50

// hasFlag reports whether bin's serve takes --name (older builds, given
// with -boxbroker, may not).
func hasFlag(ctx context.Context, bin, name string) bool {
	out, _ := exec.CommandContext(ctx, bin, "serve", "-h").CombinedOutput()
	return strings.Contains(string(out), "-"+name)
}

// report posts, with the box's client, a realistic declaration: four
// capabilities for this broker, one for another.
func report(ctx context.Context, url, token string, inferenceWords ...string) error {
	c, err := boxclient.New(url, token)
	if err != nil {
		return err
	}
	entry := func(name, broker string, scope ...string) boxclient.Capability {
		return boxclient.Capability{Name: name, Broker: broker, Scope: scope}
	}
	_, err = c.Report(ctx, boxclient.Report{Capabilities: []boxclient.Capability{
		entry("inference", "lobby", inferenceWords...),
		entry("egress", "lobby", "GITHUB", "OPENAI", "STRIPE_TEST"),
		entry("feedback", "lobby", "agent", "passive"),
		entry("fountain", "lobby", "conversations", "sandboxes"),
		entry("inference", "door", "agent"),
	}})
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// runCLI runs a boxbroker subcommand with stdin and returns its stdout.
func runCLI(ctx context.Context, bin string, env []string, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("boxbroker %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// buildBroker builds ./cmd/boxbroker into dir.
func buildBroker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "boxbroker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/boxbroker")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/boxbroker (run the harness from the repository's root): %w", err)
	}
	return bin, nil
}

// nginxConf is the reverse proxy an operator would put in front of the
// Anthropic API instead: proxy_pass to the HTTPS upstream with its
// certificate verified against the run's CA and a keepalive pool of
// upstream connections, a fixed x-api-key injected, the box's key
// checked against the allowed ones (the nearest nginx comes to the
// broker's token check), no buffering of streams.
const nginxConf = `{{user}}worker_processes auto;
worker_rlimit_nofile {{nofile}};
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections {{conns}}; }
http {
  access_log {{dir}}/access.log;
  client_body_temp_path {{dir}}/body;
  proxy_temp_path {{dir}}/proxy;
  fastcgi_temp_path {{dir}}/fastcgi;
  uwsgi_temp_path {{dir}}/uwsgi;
  scgi_temp_path {{dir}}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  client_max_body_size 64m;
  upstream anthropic {
    server {{upstream}};
    keepalive 256;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
  }
  proxy_http_version 1.1;
  proxy_ssl_trusted_certificate {{ca}};
  proxy_ssl_verify on;
  proxy_ssl_name {{name}};
  proxy_ssl_server_name on;
  proxy_ssl_session_reuse on;
  proxy_buffering off;
  proxy_request_buffering off;
  proxy_read_timeout 600s;
  map_hash_bucket_size 128;
  map $http_authorization $bench_egress_allowed {
    default 0;
    "Bearer {{token}}" 1;
  }
  map $http_x_api_key $bench_allowed {
    default 0;
    "{{token}}" 1;
{{idle}}  }
  server {
    listen {{listen}} backlog=4096 reuseport;
    location /llm/anthropic/ {
      if ($bench_allowed = 0) {
        add_header Content-Type application/json always;
        return 403 '{"type":"error","error":{"type":"permission_error","message":"This box may not call inference."}}\n';
      }
      proxy_pass https://anthropic/;
      # proxy_set_header is inherited only by a level that sets none, so
      # each location sets all of its own.
      proxy_set_header Connection "";
      proxy_set_header Host {{upstream}};
      proxy_set_header Authorization "";
      proxy_set_header X-Api-Key "{{credential}}";
    }
    location /egress/GITHUB/ {
      if ($bench_egress_allowed = 0) {
        add_header Content-Type application/json always;
        return 403 '{"type":"error","error":{"type":"permission_error","message":"This box may not use GITHUB."}}\n';
      }
      proxy_pass https://anthropic/egress-api/;
      proxy_set_header Connection "";
      proxy_set_header Host {{upstream}};
      proxy_set_header Authorization "Bearer {{secret}}";
    }
  }
}
`

// startNginx writes nginx.conf into dir and runs nginx in the foreground,
// in front of the stand-in's HTTPS address upstream. nginx speaks
// HTTP/1.1 to its upstreams. nginx.conf holds the credential, as an
// operator's would; it is written 0600 in the run's own directory.
func startNginx(ctx context.Context, dir, ip, upstream string, o *options) (*child, *path, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		return nil, nil, errNoNginx
	}
	listen, _, err := freeAddr(ip)
	if err != nil {
		return nil, nil, err
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // workers must reach the temp directory
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	conf := strings.NewReplacer("{{user}}", user, "{{dir}}", dir, "{{upstream}}", upstream,
		"{{ca}}", o.certs.ca, "{{name}}", upstreamName, "{{token}}", o.token, "{{credential}}", o.credential, "{{secret}}", o.egressSecret, "{{idle}}", idleMap(o.idleTokens), "{{listen}}", listen,
		"{{nofile}}", fmt.Sprint(lim.Cur), "{{conns}}", fmt.Sprint(lim.Cur-16)).Replace(nginxConf)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	c, err := startListening(cmd, "nginx", listen, 10*time.Second, func() string { return ": " + errb.String() })
	if err != nil {
		return nil, nil, err
	}
	// nginx reaches its upstream over HTTP/1.1, and its workers are the
	// master's children.
	p := boxPath("nginx", "http://"+listen, "", o, cmd.Process.Pid)
	p.proc.children = true
	return c, p, nil
}

// idleMap lists the idle boxes' tokens in nginx's map of allowed keys.
func idleMap(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		fmt.Fprintf(&b, "    %q 1;\n", t)
	}
	return b.String()
}

var errNoNginx = errors.New("nginx is not installed (apt-get install -y nginx); its rows are skipped")

// freeAddr is an address on ip, and its port, that nothing listens on
// now, for a process that takes a fixed port.
func freeAddr(ip string) (string, int, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return "", 0, err
	}
	defer ln.Close()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port, nil
}

// startListening starts cmd, ended with the harness however it ends, and
// waits up to limit for it to listen on addr. When it does not, it is
// stopped and the error ends with detail(): where its output went.
func startListening(cmd *exec.Cmd, name, addr string, limit time.Duration, detail func() string) (*child, error) {
	dieWithUs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd}
	if err := waitListening(addr, limit); err != nil {
		c.stop()
		return nil, fmt.Errorf("%s did not start: %v%s", name, err, detail())
	}
	return c, nil
}

func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// copyDir copies the files of the directory src into a new directory dst,
// each with its mode (the master key's 0600 included).
func copyDir(dst, src string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, info.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
