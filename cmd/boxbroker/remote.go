package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
)

// adminURLFlag adds --admin-url to fs: the admin API a command acts
// through instead of opening the store itself.
func (c *cli) adminURLFlag(fs *flag.FlagSet) *string {
	return fs.String("admin-url", c.getenv("BOXBROKER_ADMIN_URL"),
		"act through the admin API at this URL, authenticating with BOXBROKER_ADMIN_TOKEN, instead of opening the store (BOXBROKER_ADMIN_URL)")
}

// adminClient is a client for the admin API at url, with the token from
// BOXBROKER_ADMIN_TOKEN: never from an argument.
func (c *cli) adminClient(url string) (*adminclient.Client, error) {
	return adminclient.New(url, c.getenv("BOXBROKER_ADMIN_TOKEN"), nil)
}

// remoteError says an admin API refusal as the CLI says its own errors.
func remoteError(err error) error {
	var ae *adminclient.APIError
	if errors.As(err, &ae) {
		return fmt.Errorf("%s (%d)", safe(ae.Message), ae.Status)
	}
	return err
}

// parseViewTime reads a time the admin API wrote; zero for null.
func parseViewTime(v *string) time.Time {
	if v == nil {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, *v)
	return t
}

// rfc3339 is a time a view wrote, as the CLI prints times; "" for null.
func rfc3339(v *string) string {
	t := parseViewTime(v)
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
