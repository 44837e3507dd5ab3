package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// portkeyShim is preloaded into Portkey's node process (node --require).
// It does two things the gateway has no option for:
//
//   - it binds the gateway's listener to BENCH_LISTEN_HOST, a loopback
//     address (the gateway listens on every interface otherwise);
//   - it gives each upstream answer mutable headers. On Node 20 the
//     gateway's streamed Messages answers fail with "TypeError: immutable"
//     when it adds its x-portkey-* headers to fetch's answer
//     (Portkey-AI/gateway#1389, #1550); the gateway's own fix (#1551)
//     copies the answer the same way.
const portkeyShim = `'use strict';
const net = require('net');
const host = process.env.BENCH_LISTEN_HOST;
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (host && typeof args[0] === 'number' && (args.length < 2 || args[1] === undefined || typeof args[1] === 'function')) {
    if (typeof args[1] === 'function') args.splice(1, 0, host); else args[1] = host;
  }
  return listen.apply(this, args);
};
const fetch = globalThis.fetch;
globalThis.fetch = async function (...args) {
  const r = await fetch.apply(this, args);
  return new Response(r.body, { status: r.status, statusText: r.statusText, headers: r.headers });
};
`

// portkeyEntry is the gateway's start script inside its install
// directory (the package's bin).
const portkeyEntry = "node_modules/@portkey-ai/gateway/build/start-server.js"

// errNoPortkey says why the Portkey path is absent.
var errNoPortkey = errors.New("the Portkey gateway is not installed and could not be (it needs node and npm, and npm its registry)")

// installPortkey installs @portkey-ai/gateway@version with npm into dir
// (never into the checkout), unless it is there already, and returns
// the gateway's start script.
func installPortkey(ctx context.Context, dir, version string) (string, error) {
	entry := filepath.Join(dir, portkeyEntry)
	pkg := filepath.Join(dir, "package.json")
	want := fmt.Sprintf(`{"private":true,"dependencies":{"@portkey-ai/gateway":%q}}`+"\n", version)
	if have, err := os.ReadFile(pkg); err == nil && string(have) == want {
		if _, err := os.Stat(entry); err == nil {
			return entry, nil
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("%w: no node", errNoPortkey)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%w: no npm", errNoPortkey)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(pkg, []byte(want), 0o644); err != nil {
		return "", err
	}
	fmt.Printf("installing @portkey-ai/gateway@%s into %s ...\n", version, dir)
	ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// --ignore-scripts: its postinstall (patch-package) patches nothing
	// the gateway needs at run time.
	cmd := exec.CommandContext(ictx, npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--omit=dev")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: npm install: %v: %s", errNoPortkey, err, lastLines(out, 5))
	}
	if _, err := os.Stat(entry); err != nil {
		return "", fmt.Errorf("%w: %v", errNoPortkey, err)
	}
	return entry, nil
}

// startPortkey runs Portkey's gateway (node, its start script, --port,
// --headless) on ip, pointed at the stand-in's HTTPS address upstream
// through its custom-host header, trusting the run's CA through
// NODE_EXTRA_CA_CERTS. Its log goes to a file in dir.
func startPortkey(ctx context.Context, entry, dir, ip, upstream string, o *options) (*child, *path, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no node", errNoPortkey)
	}
	shim := filepath.Join(dir, "portkey-shim.cjs")
	if err := os.WriteFile(shim, []byte(portkeyShim), 0o600); err != nil {
		return nil, nil, err
	}
	listen, port, err := freeAddr(ip)
	if err != nil {
		return nil, nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "portkey.log"))
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	host, _, _ := net.SplitHostPort(upstream)
	cmd := exec.CommandContext(ctx, node, "--require", shim, entry, fmt.Sprintf("--port=%d", port), "--headless")
	cmd.Dir = filepath.Dir(entry)
	cmd.Env = append(os.Environ(),
		"BENCH_LISTEN_HOST="+ip,
		"NODE_EXTRA_CA_CERTS="+o.certs.ca,
		// The gateway refuses custom hosts on private addresses unless
		// they are listed here.
		"TRUSTED_CUSTOM_HOSTS="+host,
		"NODE_ENV=production")
	cmd.Stdout, cmd.Stderr = logf, logf
	c, err := startListening(cmd, "portkey", listen, 30*time.Second, func() string { return " (log: " + logf.Name() + ")" })
	if err != nil {
		return nil, nil, err
	}
	h := http.Header{}
	h.Set("X-Portkey-Provider", "anthropic")
	h.Set("X-Portkey-Custom-Host", "https://"+upstream+"/v1")
	return c, &path{
		name: "Portkey", base: "http://" + listen, key: o.credential, header: h,
		fdsPerStream: 2,
		proc:         procs{pid: cmd.Process.Pid},
	}, nil
}

// lastLines is the last n lines of b, for an error message.
func lastLines(b []byte, n int) string {
	s, ended := strings.CutSuffix(string(b), "\n")
	lines := strings.SplitAfter(s, "\n")
	s = strings.Join(lines[max(len(lines)-n, 0):], "")
	if ended {
		s += "\n"
	}
	return s
}
