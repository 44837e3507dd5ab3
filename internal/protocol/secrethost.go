package protocol

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// ParseSecretHost parses the base URL an egress secret may be sent to
// (the one host the protocol pins it to): an http or https
// URL with a host, an optional port and an optional path prefix, and no
// user, password, query or fragment. It returns the URL in its canonical
// form (scheme and host in lower case, an IP address as netip writes it,
// no trailing slash), or an error
// that says what is wrong with s, fit to show to the operator.
func ParseSecretHost(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("the host is not a URL; write it as https://host[:port][/path]")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, errors.New("the host must be an https:// (or http://) URL, such as https://api.github.com")
	}
	// From here s is quoted as ShownURL writes it: what an operator
	// pasted into its user, query or fragment (a key, a password) is
	// never repeated into a terminal, a log or a refusal.
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%q names no host; write it as https://host[:port][/path]", ShownURL(u))
	}
	if u.User != nil {
		return nil, errors.New("the host must not hold a user or password; the secret's value is what the broker sends")
	}
	if u.RawQuery != "" || u.ForceQuery {
		return nil, fmt.Errorf("%q must not hold a query", ShownURL(u))
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return nil, fmt.Errorf("%q must not hold a fragment", ShownURL(u))
	}
	host := strings.ToLower(u.Hostname())
	if host == "" || strings.ContainsAny(host, " %") {
		return nil, fmt.Errorf("%q names no usable host", ShownURL(u))
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		// An IP address in its one written form (RFC 5952 for IPv6,
		// an IPv4-mapped one as IPv4), so that a host is the same host
		// however it was written, wherever hosts are compared.
		host = ip.Unmap().String()
	}
	for _, c := range host {
		if c > 0x7e {
			return nil, fmt.Errorf("%q: write a non-ASCII host in its punycode (xn--) form", ShownURL(u))
		}
	}
	hostport := host
	if strings.Contains(host, ":") {
		hostport = "[" + host + "]"
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: the port must be a number from 1 to 65535", ShownURL(u))
		}
		hostport += ":" + p
	}
	esc := strings.TrimSuffix(u.EscapedPath(), "/")
	if strings.Contains(esc, "\\") || strings.Contains(esc, "//") {
		return nil, fmt.Errorf("%q: the path prefix must be a plain path", ShownURL(u))
	}
	for _, seg := range strings.Split(esc, "/") {
		if dec, err := url.PathUnescape(seg); err != nil || dec == "." || dec == ".." || strings.ContainsAny(dec, "/\\") {
			return nil, fmt.Errorf("%q: the path prefix must be a plain path, with no dot segments or encoded slashes", ShownURL(u))
		}
	}
	out := &url.URL{Scheme: u.Scheme, Host: hostport}
	if esc != "" {
		out.Path, _ = url.PathUnescape(esc)
		out.RawPath = esc
	}
	return out, nil
}

// ShownURL is u as an error about it shows it: its scheme, host and
// path, with "…" for its user information, query, fragment and any
// opaque part, where an operator may have pasted a credential.
func ShownURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	if v.Opaque != "" {
		v.Opaque = "…"
	}
	s := v.String()
	if u.User != nil {
		s = strings.Replace(s, "//", "//…@", 1)
	}
	if u.RawQuery != "" || u.ForceQuery {
		s += "?…"
	}
	if u.Fragment != "" {
		s += "#…"
	}
	return s
}
