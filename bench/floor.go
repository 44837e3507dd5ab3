package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/proxy"
)

// The floor is the least a proxy built from boxbroker's HTTP stack does:
// net/http's server, a bare httputil.ReverseProxy whose Rewrite sets the
// URL and the credential, and the broker's own outbound transport
// (proxy.NewTransport), with the box's key looked up in a map as nginx's
// is. It runs in a process of its own (the harness's binary again, with
// -role floor), started and measured as boxbroker is, so "× floor" is
// what boxbroker's features cost over the stack they run on.

// floorConfig is what the floor needs.
type floorConfig struct {
	listen, upstream string
	credential       string
	egressSecret     string
	keys             map[string]bool
}

// floorHandler forwards /llm/anthropic/* to the upstream with the
// credential as x-api-key, and /egress/GITHUB/* to its /egress-api/
// with the secret as the bearer; a request without an allowed key is a
// 403.
func floorHandler(cfg floorConfig) (http.Handler, error) {
	up, err := url.Parse(cfg.upstream)
	if err != nil {
		return nil, err
	}
	const llm, egress = "/llm/anthropic", "/egress/GITHUB"
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p := pr.In.URL.Path
			pr.SetURL(up)
			if rest, ok := strings.CutPrefix(p, egress); ok {
				pr.Out.URL.Path = "/egress-api" + rest
				pr.Out.Header.Set("Authorization", "Bearer "+cfg.egressSecret)
				return
			}
			pr.Out.URL.Path = strings.TrimPrefix(p, llm)
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set("X-Api-Key", cfg.credential)
		},
		Transport:  proxy.NewTransport(proxy.TransportOptions{}),
		BufferPool: &copyBuffers{},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		if !cfg.keys[key] {
			http.Error(w, `{"type":"error","error":{"type":"permission_error","message":"This key is not allowed."}}`, http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	}), nil
}

// copyBuffers is a pool of 32 KiB copy buffers: the floor's ReverseProxy's,
// and the load generator's for reading answers.
type copyBuffers struct{ p sync.Pool }

func (c *copyBuffers) Get() []byte {
	if b, ok := c.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (c *copyBuffers) Put(b []byte) { c.p.Put(&b) }

// runFloor is the -role floor process. The credential, the egress secret
// and the allowed keys come on stdin, one a line, ended by an empty
// line; it trusts the run's CA through SSL_CERT_FILE, prints LISTEN and
// its address, and serves until SIGTERM or until its stdin closes.
func runFloor(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	var cfg floorConfig
	fs.StringVar(&cfg.listen, "listen", "127.0.0.5:0", "address to serve plain HTTP on")
	fs.StringVar(&cfg.upstream, "upstream", "", "the stand-in's https:// URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	lines, err := readLines(in)
	if err != nil || len(lines) < 3 {
		return fmt.Errorf("stdin: %d lines, want the credential, the egress secret and at least one key, one a line, then an empty line (%v)", len(lines), err)
	}
	cfg.credential, cfg.egressSecret = lines[0], lines[1]
	cfg.keys = map[string]bool{}
	for _, k := range lines[2:] {
		cfg.keys[k] = true
	}
	h, err := floorHandler(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("LISTEN http://%s\n", ln.Addr())
	serveUntilGone(in)
	return srv.Close()
}

// startFloor starts the floor in front of upstream (an https:// URL) and
// returns it as a path like boxbroker's.
func startFloor(ctx context.Context, ip, upstream string, o *options) (*child, *path, error) {
	keys := append([]string{o.credential, o.egressSecret, o.token}, o.idleTokens...)
	c, addrs, err := startRole(ctx, "floor", append(os.Environ(), "SSL_CERT_FILE="+o.certs.ca), keys,
		"-listen", ip+":0", "-upstream", upstream)
	if err != nil {
		return nil, nil, err
	}
	return c, boxPath("floor", addrs[0], upstream, o, c.cmd.Process.Pid), nil
}
