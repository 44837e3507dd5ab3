package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/intentius/boxbroker/internal/proxyca"
)

// runProxyRotate answers `proxy ca rotate`: it makes a new CA for the
// HTTPS proxy, to sign in place of the current one once --grace has
// passed (at once with --grace 0, for a key that must not sign again),
// and prints the new CA's certificate (PEM) for box images to trust, on
// the data directory's store or through the admin API (--admin-url).
// Until the switch the current CA goes on signing and `proxy ca` prints
// both certificates. It asks first unless --yes.
func runProxyRotate(ctx context.Context, c *cli, args []string) error {
	cmd := c.command("proxy ca rotate")
	grace := cmd.Duration("grace", proxyca.DefaultRotateGrace, "how long the current CA goes on signing, for boxes to come to trust the new one; 0 to switch at once")
	yes := yesFlag(cmd.FlagSet, true, "rotate")
	pos, err := parseInterspersed(cmd.FlagSet, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: proxy ca rotate takes no arguments, got %s", errUsage, namedAll(pos))
	}
	if *grace < 0 {
		return fmt.Errorf("%w: --grace %v is not a duration of 0 or more", errUsage, *grace)
	}
	return cmd.on(ctx, c, false, true, func(be *backend) error {
		question := fmt.Sprintf("Rotate the egress proxy's CA? The proxy signs with a new CA in %v; a box that does not trust the new certificate by then is refused TLS by the proxy.", *grace)
		if *grace == 0 {
			question = "Rotate the egress proxy's CA now? The proxy signs with a new CA at once (within a minute for a running serve); a box that does not trust it is refused TLS by the proxy."
		}
		if err := c.sure(*yes, question, "rotated", "rotate"); err != nil {
			return err
		}
		r, err := be.RotateProxyCA(ctx, *grace)
		if err != nil {
			return err
		}
		from, err := time.Parse(time.RFC3339, r.From)
		if err != nil {
			return fmt.Errorf("the new CA's moment %q is not a time", safe(r.From))
		}
		if _, err := io.WriteString(c.stdout, r.Certificate); err != nil {
			return err
		}
		then := "until then `boxbroker proxy ca` prints the current certificate and this one, for boxes to trust both"
		if *grace == 0 {
			then = "the CA before it signs no more, and `boxbroker proxy ca` prints this one alone: a box that trusts only the old one is refused TLS"
		}
		fmt.Fprintf(c.stderr, "The egress proxy signs with this CA from %s (a running serve reads it within a minute); %s.\n",
			from.UTC().Format(time.RFC3339), then)
		return nil
	})
}
