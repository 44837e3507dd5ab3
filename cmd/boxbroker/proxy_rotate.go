package main

import (
	"context"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/server"
)

// runProxyRotate answers `proxy ca rotate`: it makes a new CA for the
// HTTPS proxy, to sign in place of the current one once --grace has
// passed (at once with --grace 0, for a key that must not sign again),
// and prints the new CA's certificate (PEM) for box images to trust.
// Until the switch the current CA goes on signing and `proxy ca` prints
// both certificates. It asks first unless --yes.
func runProxyRotate(ctx context.Context, c *cli, args []string) error {
	var cfg server.Config
	fs := c.flags("proxy ca rotate", &cfg)
	grace := fs.Duration("grace", egressproxy.DefaultRotateGrace, "how long the current CA goes on signing, for boxes to come to trust the new one; 0 to switch at once")
	yes := fs.Bool("yes", false, "rotate without asking")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: proxy ca rotate takes no arguments, got %q", errUsage, pos)
	}
	if *grace < 0 {
		return fmt.Errorf("%w: --grace %v is not a duration of 0 or more", errUsage, *grace)
	}
	st, keyring, err := sealing(ctx, &cfg, openExisting)
	if err != nil {
		return err
	}
	defer st.Close()
	question := fmt.Sprintf("Rotate the egress proxy's CA? The proxy signs with a new CA in %v; a box that does not trust the new certificate by then is refused TLS by the proxy.", *grace)
	if *grace == 0 {
		question = "Rotate the egress proxy's CA now? The proxy signs with a new CA at once (within a minute for a running serve); a box that does not trust it is refused TLS by the proxy."
	}
	if err := c.sure(*yes, question, "rotated", "rotate"); err != nil {
		return err
	}
	pem, from, err := egressproxy.RotateCA(ctx, st, keyring, *grace, time.Now())
	if err != nil {
		return err
	}
	if _, err := c.stdout.Write(pem); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "The egress proxy signs with this CA from %s (a running serve reads it within a minute); until then `boxbroker proxy ca` prints the current certificate and this one, for boxes to trust both.\n",
		from.UTC().Format(time.RFC3339))
	return nil
}
