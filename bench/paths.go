package main

import (
	"bufio"
	"bytes"
	"context"
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
)

// A path is one way to the stand-in upstream: direct, via nginx or via
// boxbroker.
type path struct {
	name string
	// base is the URL the client calls (Messages is base+"/v1/messages").
	base string
	// key is what the client sends as x-api-key: the credential on the
	// direct path, the box's token through a proxy.
	key string
	// refusedKey is the key whose calls are refused (403); refuseURL is
	// where the direct path's 403 is answered instead.
	refusedKey, refuseURL string
	// egressURL is a GET at the third-party API, and egressKey the
	// bearer the client sends it with (the secret direct, the box's
	// token through a proxy).
	egressURL, egressKey string
	// idleKeys are the keys idle streams take turns with: many boxes, as
	// thousands of streams come from many boxes, each under the broker's
	// default bound on one box's requests in flight.
	idleKeys []string
	// decideURL is decide's route; empty where decide is not served.
	decideURL string
	// proc is the proxy's processes; zero for the direct path.
	proc procs
	// note, when set, says why the path is absent.
	note string
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

// startUpstream starts the stand-in upstream process and returns its plain
// and TLS addresses.
func startUpstream(ctx context.Context, dir string, o *options) (*child, string, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", "", err
	}
	certFile, keyFile, err := writeCert(dir, net.ParseIP(o.upstreamIP))
	if err != nil {
		return nil, "", "", fmt.Errorf("certificate: %w", err)
	}
	o.certFile = certFile
	cmd := exec.CommandContext(ctx, self, "-role", "upstream",
		"-listen", o.upstreamIP+":0", "-tls-listen", o.upstreamIP+":0", "-cert", certFile, "-key", keyFile,
		"-credential", o.credential, "-egress-secret", o.egressSecret, "-events", fmt.Sprint(o.events), "-ping", o.ping.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", "", err
	}
	_ = stdin // held open for the child's life; closed when we exit
	c, line, err := spawn(cmd, "upstream")
	if err != nil {
		return nil, "", "", err
	}
	var plain, tlsAddr string
	if _, err := fmt.Sscanf(line, "LISTEN %s %s", &plain, &tlsAddr); err != nil {
		c.stop()
		return nil, "", "", fmt.Errorf("upstream did not start: %q %v", line, err)
	}
	return c, plain, tlsAddr, nil
}

// spawn starts cmd, ended with the harness however it ends, and returns
// it as a child with the first line it prints (where it listens); the
// rest of its output is read and dropped.
func spawn(cmd *exec.Cmd, name string) (*child, string, error) {
	dieWithUs(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	c := &child{name: name, cmd: cmd}
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
// two boxes in dataDir (once), sets the credential, serves on ip:0 against
// upstream, and reports each box's declaration. env is added to the
// server's environment.
func startBroker(ctx context.Context, bin, dataDir, ip, upstream string, o *options, env []string, tag string) (*child, *path, error) {
	base := append(os.Environ(), "BOXBROKER_DATA="+dataDir)
	if o.token == "" {
		var err error
		if o.token, err = runCLI(ctx, bin, base, "", "box", "add", "bench"); err != nil {
			return nil, nil, err
		}
		if o.refusedToken, err = runCLI(ctx, bin, base, "", "box", "add", "refused"); err != nil {
			return nil, nil, err
		}
		if _, err = runCLI(ctx, bin, base, o.credential, "credential", "set", "anthropic"); err != nil {
			return nil, nil, err
		}
		if _, err = runCLI(ctx, bin, base, o.egressSecret, "secret", "set", "bench", "GITHUB", "--host", o.egressHost); err != nil {
			return nil, nil, err
		}
		for i := 0; i < idleBoxes; i++ {
			t, err := runCLI(ctx, bin, base, "", "box", "add", fmt.Sprintf("idle-%02d", i))
			if err != nil {
				return nil, nil, err
			}
			o.idleTokens = append(o.idleTokens, t)
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
	cmd.Env = append(base, env...)
	cmd.Stderr = logf
	c, line, err := spawn(cmd, "boxbroker")
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
		words string
	}
	reports := []boxReport{{o.token, `"agent","decide"`}, {o.refusedToken, `"decide"`}}
	for _, t := range o.idleTokens {
		reports = append(reports, boxReport{t, `"agent"`})
	}
	for _, b := range reports {
		if err := report(ctx, url, b.token, b.words); err != nil {
			c.stop()
			return nil, nil, err
		}
	}
	return c, &path{
		base: url + "/llm/anthropic", key: o.token, refusedKey: o.refusedToken,
		egressURL: url + "/egress/GITHUB/repos/octocat/hello-world", egressKey: o.token,
		decideURL: url + "/decide/v1/systemone", idleKeys: o.idleTokens,
		proc: procs{pid: cmd.Process.Pid},
	}, nil
}

// startFloor runs the floor path (see runFloor) on ip:0, in front of
// the stand-in at upstream, allowing the bench box's token and the idle
// boxes'.
func startFloor(ctx context.Context, ip, upstream string, o *options) (*child, *path, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-role", "floor", "-listen", ip+":0", "-upstream", upstream)
	keys := append([]string{o.credential, o.egressSecret, o.token}, o.idleTokens...)
	cmd.Stdin = strings.NewReader(strings.Join(keys, "\n") + "\n")
	cmd.Stderr = os.Stderr
	c, line, err := spawn(cmd, "floor")
	if err != nil {
		return nil, nil, err
	}
	var addr string
	if _, err := fmt.Sscanf(line, "LISTEN %s", &addr); err != nil {
		c.stop()
		return nil, nil, fmt.Errorf("floor did not start: %q %v", line, err)
	}
	url := "http://" + addr
	return c, &path{
		base: url + "/llm/anthropic", key: o.token, refusedKey: o.refusedToken,
		egressURL: url + "/egress/GITHUB/repos/octocat/hello-world", egressKey: o.token,
		idleKeys: o.idleTokens,
		proc:     procs{pid: cmd.Process.Pid},
	}, nil
}

// idleBoxes is how many boxes the idle streams come from.
const idleBoxes = 50

// hasFlag reports whether bin's serve takes --name (older builds, given
// with -boxbroker, may not).
func hasFlag(ctx context.Context, bin, name string) bool {
	out, _ := exec.CommandContext(ctx, bin, "serve", "-h").CombinedOutput()
	return strings.Contains(string(out), "-"+name)
}

// report posts a realistic declaration: four capabilities for this
// broker, one for another.
func report(ctx context.Context, url, token, inferenceWords string) error {
	body := `{"capabilities":[` +
		`{"name":"inference","broker":"lobby","scope":[` + inferenceWords + `]},` +
		`{"name":"egress","broker":"lobby","scope":["GITHUB","OPENAI","STRIPE_TEST"]},` +
		`{"name":"feedback","broker":"lobby","scope":["agent","passive"]},` +
		`{"name":"fountain","broker":"lobby","scope":["conversations","sandboxes"]},` +
		`{"name":"inference","broker":"door","scope":["agent"]}]}`
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/box/declaration", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("report: %d %s", resp.StatusCode, b)
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
// Anthropic API instead: proxy_pass with upstream keepalive, a fixed
// x-api-key injected, the box's key checked against one allowed value
// (the nearest nginx comes to the broker's token check), no buffering of
// streams.
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
  }
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
      proxy_pass http://anthropic/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "";
      proxy_set_header X-Api-Key "{{credential}}";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }
    location /egress/GITHUB/ {
      if ($bench_egress_allowed = 0) {
        add_header Content-Type application/json always;
        return 403 '{"type":"error","error":{"type":"permission_error","message":"This box may not use GITHUB."}}\n';
      }
      proxy_pass http://anthropic/egress-api/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer {{secret}}";
      proxy_buffering off;
      proxy_request_buffering off;
    }
  }
}
`

// startNginx writes nginx.conf into dir and runs nginx in the foreground.
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
	port, err := freePort(ip)
	if err != nil {
		return nil, nil, err
	}
	listen := net.JoinHostPort(ip, fmt.Sprint(port))
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n" // workers must reach the temp directory
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	conf := strings.NewReplacer("{{user}}", user, "{{dir}}", dir, "{{upstream}}", upstream,
		"{{token}}", o.token, "{{credential}}", o.credential, "{{secret}}", o.egressSecret, "{{idle}}", idleMap(o.idleTokens), "{{listen}}", listen,
		"{{nofile}}", fmt.Sprint(lim.Cur), "{{conns}}", fmt.Sprint(lim.Cur-16)).Replace(nginxConf)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		return nil, nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	dieWithUs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	c := &child{name: "nginx", cmd: cmd}
	if err := waitListening(listen, 10*time.Second); err != nil {
		c.stop()
		return nil, nil, fmt.Errorf("nginx did not start: %v: %s", err, errb.String())
	}
	return c, &path{
		base: "http://" + listen + "/llm/anthropic", key: o.token, refusedKey: o.refusedToken,
		egressURL: "http://" + listen + "/egress/GITHUB/repos/octocat/hello-world", egressKey: o.token,
		idleKeys: o.idleTokens,
		proc:     procs{pid: cmd.Process.Pid, children: true},
	}, nil
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

func freePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
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
