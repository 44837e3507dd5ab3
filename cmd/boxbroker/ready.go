package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// readyTimeout bounds `boxbroker ready`'s whole request.
const readyTimeout = 5 * time.Second

// runReady is `boxbroker ready`: it asks a running serve's box-facing
// listener for /readyz and prints the answer; the exit status is 0 when
// it is ready (200) and 1 otherwise, so a container's HEALTHCHECK or a
// script can run it. The address is --url, or else BOXBROKER_LISTEN's
// (127.0.0.1:8787 by default; a wildcard host is asked on 127.0.0.1).
func runReady(ctx context.Context, c *cli, args []string) error {
	fs := flag.NewFlagSet("boxbroker ready", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	base := fs.String("url", "", "the broker's box-facing URL, such as https://broker.example:8787 (default: http:// and BOXBROKER_LISTEN's address, 127.0.0.1 for a wildcard host)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: ready takes no arguments", errUsage)
	}
	u := *base
	if u == "" {
		listen := c.envOr("BOXBROKER_LISTEN", "127.0.0.1:8787")
		var err error
		if u, err = listenURL(listen); errors.Is(err, errPickedPort) {
			return fmt.Errorf("%w: BOXBROKER_LISTEN=%q: %v; give that address as --url", errUsage, listen, err)
		} else if err != nil {
			return fmt.Errorf("%w: BOXBROKER_LISTEN=%q is not a host:port; give --url", errUsage, listen)
		}
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return fmt.Errorf("%w: --url %q is not an http(s) URL with a host", errUsage, safe(u))
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, parsed.JoinPath("readyz").String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// Most often no serve listens there, or it listens elsewhere:
		// say where the address came from and how to name another.
		return fmt.Errorf("not ready: no broker answered at %s (is `boxbroker serve` running there? --url names the box-facing address serve printed, or BOXBROKER_LISTEN the one it listens on): %w", safe(parsed.Redacted()), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	printAnswer(c.stdout, body)
	if resp.StatusCode != http.StatusOK {
		return errors.New("not ready: /readyz answered " + resp.Status)
	}
	return nil
}

// printAnswer prints a /readyz answer on a line of its own: JSON as one
// line of JSON (what a script or jq reads), anything else with its
// control characters escaped (safe).
func printAnswer(w io.Writer, body []byte) {
	var line bytes.Buffer
	if json.Valid(body) && json.Compact(&line, body) == nil {
		fmt.Fprintln(jsonSafe{w}, line.String())
		return
	}
	fmt.Fprintln(w, safe(string(bytes.TrimRight(body, "\r\n"))))
}

// errPickedPort is listenURL's error for a listen address of port 0:
// serve picks its port then, and only its `listening on` line says
// which.
var errPickedPort = errors.New("port 0 lets serve pick its port, which only its `listening on` line names")

// listenURL is the http:// URL a client on this machine reaches a
// serve listening on listen (host:port) at: a wildcard or empty host is
// reached on 127.0.0.1. Port 0 is errPickedPort.
func listenURL(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if port == "0" {
		return "", errPickedPort
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// hintURL is the default of --url for the hints box add, box rotate and
// secret set print: BOXBROKER_URL, else the address BOXBROKER_LISTEN
// gives serve (as `ready` asks it), else http://127.0.0.1:8787. For a
// BOXBROKER_LISTEN of port 0 it is that address as given, which
// checkHintURL refuses: no hint can name the port serve picked.
func (c *cli) hintURL() string {
	if v := c.getenv("BOXBROKER_URL"); v != "" {
		return v
	}
	listen := c.getenv("BOXBROKER_LISTEN")
	if u, err := listenURL(listen); err == nil {
		return u
	} else if errors.Is(err, errPickedPort) {
		return "http://" + listen
	}
	return "http://127.0.0.1:8787"
}
