package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// runFloor is the "floor" path's process (-role floor): a proxy built
// from boxbroker's own parts — its HTTP/1.1 server (h1server), its
// Forwarder and upstream transport, its collector tuning — doing only
// what the nginx path does: the box's key looked up among the allowed
// ones, the credential (or the egress secret) injected. No store, no
// rule, no spend, no audit, no log line, no metrics. What boxbroker costs
// above it is its features; what it costs above nginx is the language's
// and the runtime's.
//
// The keys come on stdin, one a line: credential, egress secret, then
// the allowed tokens.
func runFloor(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.5:0", "address to serve on")
	upstream := fs.String("upstream", "", "stand-in upstream's plain address (host:port)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return err
	}
	lines := strings.Fields(string(in))
	if len(lines) < 3 {
		return fmt.Errorf("stdin: want the credential, the egress secret and at least one token, one a line")
	}
	credential, secret, tokens := lines[0], lines[1], lines[2:]
	base := &url.URL{Scheme: "http", Host: *upstream}
	// A map, as nginx's is: the bench's keys are not worth a constant-time
	// compare, and fifty of them would cost more than nginx's lookup.
	allow := map[string]bool{}
	for _, t := range tokens {
		allow[t] = true
	}
	allowed := func(key string) bool { return allow[key] }
	discard := slog.New(slog.DiscardHandler)
	fwd := proxy.New(func(pr *httputil.ProxyRequest) {
		in, out := pr.In, pr.Out
		if p, ok := strings.CutPrefix(in.URL.Path, "/egress/GITHUB/"); ok {
			proxy.Target(out, base, "/egress-api/"+p, in.URL.RawQuery)
			out.Header.Set("Authorization", "Bearer "+secret)
			return
		}
		proxy.Target(out, base, strings.TrimPrefix(in.URL.Path, "/llm/anthropic"), in.URL.RawQuery)
		out.Header.Del("Authorization")
		out.Header.Set("X-Api-Key", credential)
	}, proxy.NewTransport(proxy.TransportOptions{}), proxy.ErrorHandler(discard, "upstream"))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/llm/anthropic/"):
			if !allowed(r.Header.Get("X-Api-Key")) {
				protocol.WriteRefusal(w, http.StatusForbidden, protocol.TypePermission, "This box may not call inference.")
				return
			}
		case strings.HasPrefix(r.URL.Path, "/egress/GITHUB/"):
			key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !allowed(key) {
				protocol.WriteRefusal(w, http.StatusForbidden, protocol.TypePermission, "This box may not use GITHUB.")
				return
			}
		default:
			protocol.WriteRefusal(w, http.StatusNotFound, protocol.TypeNotFound, "No such route.")
			return
		}
		fwd.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	return hs.Serve(ln)
}
