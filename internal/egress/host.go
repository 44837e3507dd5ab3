package egress

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/proxy"
)

// dialAddr is the host:port a connection to u dials, as net/http
// computes it.
func dialAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// outbound builds the URL a request goes to: the secret's base URL (as
// ParseHost returned it) with tail (the escaped rest of the request's path
// after /egress/NAME, "" or beginning with "/") joined under its path, and
// rawQuery with token swapped for value (and any other token replaced,
// see scrubOthers). Scheme, host and port are base's
// and nothing else: no part of tail or rawQuery can change them. It
// returns a *pathError, whose message is shown to the box, for a path it
// refuses: one holding a dot segment or an invalid escape (see joinPath),
// or the token, which the broker does not swap in a path.
func outbound(base *url.URL, tail, rawQuery, token, value string) (*url.URL, error) {
	path, rawPath, err := joinPath(base, tail)
	if err != nil {
		return nil, err
	}
	if strings.Contains(path, token) || strings.Contains(rawPath, token) {
		return nil, &pathError{"The box's token is in the path, where the broker does not swap it; send it in a header or the query."}
	}
	target := &url.URL{Scheme: base.Scheme, Host: base.Host, Path: path, RawPath: rawPath,
		RawQuery: scrubOthers(swapQuery(rawQuery, token, value), value)}
	if target.EscapedPath() != rawPath {
		target.RawPath = "" // not a valid encoding after all: let net/url encode path
	}
	return target, nil
}

// pathError is a path the broker refuses to forward; its message is shown
// to the box. joinPath and outbound return no other error.
type pathError struct{ msg string }

func (e *pathError) Error() string { return e.msg }

// joinPath returns the path to send, in decoded and escaped forms: the
// base URL's path with tail (the escaped rest of the request's path after
// /egress/NAME, "" or beginning with "/") joined under it.
//
// Runs of slashes in tail are collapsed to one. A segment that is, or
// decodes to something holding, a "." or ".." segment (split at "/" and
// at "\", so %2e%2e, ..%2F and ..\ all count) is refused: the path can
// never climb out of the base URL's path prefix. Bytes that are not
// allowed in a path are percent-encoded; encoded bytes the box sent, such
// as %2F, are kept as it sent them. The host is never taken from the
// path: the caller puts the result under the secret's base URL.
func joinPath(base *url.URL, tail string) (path, rawPath string, err error) {
	basePath, baseRaw := base.Path, base.EscapedPath()
	if tail == "" {
		if basePath == "" {
			return "/", "/", nil
		}
		return basePath, baseRaw, nil
	}
	// A base path ending in "/" (https://host/ or https://host/v1/) joins
	// without doubling it: "//x" at the start of a request line reads as
	// another authority to some hosts.
	basePath, baseRaw = strings.TrimRight(basePath, "/"), strings.TrimRight(baseRaw, "/")
	segs := strings.Split(tail[1:], "/")
	var dec, raw strings.Builder
	dec.WriteString(basePath)
	raw.WriteString(baseRaw)
	for i, seg := range segs {
		if seg == "" && i != len(segs)-1 {
			continue // collapse "//"
		}
		d, err := url.PathUnescape(seg)
		if err != nil {
			return "", "", &pathError{"The path holds an invalid percent-encoding."}
		}
		if err := checkSegment(seg); err != nil {
			return "", "", err
		}
		dec.WriteString("/" + d)
		raw.WriteString("/" + escapeSegment(seg))
	}
	return dec.String(), raw.String(), nil
}

// checkSegment refuses a path segment (as sent, escaped) that some
// common server reads as a dot segment, or that holds a NUL. It is
// decoded up to three times (so .%252e counts), split at "/" and "\",
// and each part is cut at ";" (Tomcat and Jetty read "..;x" as ".."), with
// overlong and full-width encodings of "." read as "." and trailing
// spaces dropped (as Windows does). A part that is then "." or ".." is
// refused, as is a NUL at any depth of decoding.
func checkSegment(seg string) *pathError {
	s := seg
	for range 4 {
		if strings.IndexByte(s, 0) >= 0 {
			return &pathError{"The path holds a NUL byte, which the broker does not forward."}
		}
		for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			if dotted(part) {
				return &pathError{"The path holds a dot segment (. or .., or a form some server reads as one, such as ..; or .%252e), which the broker does not forward: write the path without it."}
			}
		}
		d, err := url.PathUnescape(s)
		if err != nil || d == s {
			break
		}
		s = d
	}
	return nil
}

// dotted reports whether a decoded path part is read as a dot segment by
// some common server.
func dotted(part string) bool {
	part, _, _ = strings.Cut(part, ";")
	for _, dot := range []string{"\xc0\xae", "\xe0\x80\xae", "\uff0e"} {
		part = strings.ReplaceAll(part, dot, ".")
	}
	part = strings.TrimRight(part, " ")
	return part == "." || part == ".."
}

// escapeSegment percent-encodes every byte of an escaped path segment that
// is not allowed in one (RFC 3986 pchar), keeping the escapes it holds.
func escapeSegment(seg string) string {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%' && i+2 < len(seg) && proxy.HexByte(seg[i+1], seg[i+2]) >= 0:
			b.WriteString(seg[i : i+3])
			i += 2
		case isPchar(c):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// isPchar reports whether c may appear unescaped in a path segment:
// unreserved, sub-delims, ":" or "@".
func isPchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}
