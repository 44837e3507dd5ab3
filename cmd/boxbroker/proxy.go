package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/server"
)

// runProxy answers `proxy ca`: it prints the HTTPS proxy's CA
// certificate (PEM) for a box image to trust, making the CA first when
// the store holds none, and while a rotation is pending the new CA's
// after it, from the data directory's store or through the admin API
// (--admin-url). The CA's key is never printed. `proxy ca rotate` is
// runProxyRotate's.
func runProxy(ctx context.Context, c *cli, args []string) error {
	if args[0] != "ca" {
		return fmt.Errorf("%w: proxy takes ca: `boxbroker proxy ca` prints the egress proxy's CA certificate, `boxbroker proxy ca rotate` replaces it", errUsage)
	}
	if rest := wordFirst(args[1:], func(a string) bool { return a == "rotate" }); len(rest) > 0 && rest[0] == "rotate" {
		return runProxyRotate(ctx, c, rest[1:])
	}
	cmd := c.command("proxy ca")
	pos, err := parseInterspersed(cmd.FlagSet, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: proxy ca takes no arguments, got %s", errUsage, namedAll(pos))
	}
	// Printing the CA makes it the first time, sealing its key.
	return cmd.on(ctx, c, false, true, func(be *backend) error {
		v, err := be.ProxyCA(ctx)
		if err != nil {
			return err
		}
		_, err = io.WriteString(c.stdout, v.Certificates)
		return err
	})
}

// passthroughHosts reads --proxy-passthrough, a comma-separated list of
// hosts (host or host:port), refusing any entry that is neither, before
// serve says it is listening.
func passthroughHosts(hosts string) ([]string, error) {
	var pass, bad []string
	for _, h := range list(hosts) {
		if _, err := egressproxy.ParsePassthrough(h); err != nil {
			bad = append(bad, fmt.Sprintf("%q", safe(h)))
			continue
		}
		pass = append(pass, h)
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("configuration: --proxy-passthrough (BOXBROKER_PROXY_PASSTHROUGH) entries %s are not a host or host:port, such as api.github.com or example.com:8443", strings.Join(bad, ", "))
	}
	return pass, nil
}

// startProxy serves the HTTPS egress proxy on ln for srv until ctx
// ends; wait returns once it has stopped. pass is the list of hosts
// tunnelled untouched, from passthroughHosts. ln is closed when it
// returns an error.
func startProxy(ctx context.Context, c *cli, srv *server.Server, ln net.Listener, pass []string) (wait func() error, err error) {
	// The operator service makes the CA when the store holds none, and
	// audits its making, as `proxy ca` does.
	if _, err := srv.Admin.Operator().Via(operator.Origin{Method: "CLI", Route: "serve"}).ProxyCA(ctx); err != nil {
		ln.Close()
		return nil, err
	}
	ca, err := proxyca.Open(ctx, srv.Store, srv.Keyring, nil)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if w := ca.Warning(); w != "" {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	p, err := egressproxy.New(egressproxy.Config{
		Broker: srv.Broker, BrokerWord: srv.Config.Broker, Cache: srv.Cache, Secrets: srv.RequestStore(), CA: ca,
		Passthrough: pass, ReadHeaderTimeout: srv.Config.ReadHeaderTimeout, MaxHeaderBytes: srv.Config.MaxHeaderBytes,
		MaxTunnels: max(srv.Config.BoxConcurrent, 0), Approvals: srv.Approvals, Logger: srv.Logger(),
	})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: --proxy-passthrough: %v", errUsage, err)
	}
	fmt.Fprintf(c.stdout, "egress proxy on http://%s (HTTPS_PROXY=http://box:<token>@%s; its CA: boxbroker proxy ca)\n", ln.Addr(), ln.Addr())
	if len(pass) > 0 {
		fmt.Fprintf(c.stdout, "egress proxy passthrough: %s\n", strings.Join(pass, ", "))
		held, err := egressproxy.PassthroughHeld(ctx, srv.Store, pass)
		if err != nil {
			ln.Close()
			return nil, err
		}
		for _, h := range held {
			fmt.Fprintf(c.stderr, "warning: egress proxy passthrough %s: a secret is pinned to the host, so the proxy refuses those boxes a tunnel there (it could not keep what the broker wrote there out of one); it judges each CONNECT, and each open tunnel, by the box's secrets then\n", h)
		}
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	return func() error { return <-done }, nil
}
