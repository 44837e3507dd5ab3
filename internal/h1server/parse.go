package h1server

import (
	"bytes"
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/intentius/boxbroker/internal/httptoken"
)

// parseHead parses a request's head (through its blank line), into a
// request with ctx, when it is one this server takes; ok is false for
// anything else, which the fallback is given. The header values are
// substrings of one copy of the head.
func parseHead(ctx context.Context, raw []byte) (req *http.Request, ok bool) {
	// The request line: METHOD SP origin-form SP HTTP/1.1 CRLF.
	eol := bytes.Index(raw, crlf)
	if eol < 0 {
		return nil, false
	}
	line := raw[:eol]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 || !httptoken.Valid(line[:sp1]) {
		return nil, false
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 || string(rest[sp2+1:]) != "HTTP/1.1" {
		return nil, false
	}
	target := rest[:sp2]
	if target[0] != '/' {
		return nil, false // absolute-form, asterisk-form, authority-form
	}
	for _, b := range target {
		if b <= ' ' || b >= 0x7f || b == '#' {
			return nil, false
		}
	}
	// Count the fields, to size the map and one backing array for values.
	fields := bytes.Count(raw[eol+2:], crlf) - 1
	if fields < 0 {
		return nil, false
	}
	s := string(raw) // the one copy every string below is taken from
	method := commonMethod(line[:sp1])
	if method == "" {
		method = s[:sp1]
	}
	uri := s[sp1+1 : sp1+1+sp2]
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, false
	}
	header := make(http.Header, fields)
	values := make([]string, fields)
	var host string
	haveHost := false
	var cl int64
	haveCL := false
	closeAfter := false
	at := eol + 2
	for i := 0; i < fields; i++ {
		end := at + bytes.Index(raw[at:], crlf)
		ln := raw[at:end]
		colon := bytes.IndexByte(ln, ':')
		if colon <= 0 || !httptoken.Valid(ln[:colon]) {
			return nil, false // includes obs-fold and a space before the colon
		}
		vs, ve := at+colon+1, end
		for vs < ve && (raw[vs] == ' ' || raw[vs] == '\t') {
			vs++
		}
		for ve > vs && (raw[ve-1] == ' ' || raw[ve-1] == '\t') {
			ve--
		}
		for _, b := range raw[vs:ve] {
			if (b < ' ' && b != '\t') || b == 0x7f {
				return nil, false
			}
		}
		key := commonKey(ln[:colon])
		if key == "" {
			key = textproto.CanonicalMIMEHeaderKey(s[at : at+colon])
		}
		v := s[vs:ve]
		switch key {
		case "Host":
			if haveHost || !validHost(v) {
				return nil, false
			}
			host, haveHost = v, true
			at = end + 2
			continue
		case "Content-Length":
			if haveCL {
				return nil, false
			}
			n, ok := parseLength(v)
			if !ok {
				return nil, false
			}
			cl, haveCL = n, true
		case "Transfer-Encoding", "Expect", "Upgrade", "Pragma", "Http2-Settings":
			return nil, false
		case "Connection":
			if httptoken.Listed(v, "upgrade") {
				return nil, false
			}
			if httptoken.Listed(v, "close") {
				closeAfter = true
			}
		}
		values[i] = v
		if prev, ok := header[key]; ok {
			header[key] = append(prev, v)
		} else {
			header[key] = values[i : i+1 : i+1]
		}
		at = end + 2
	}
	if !haveHost {
		return nil, false
	}
	// One allocation: WithContext copies the (stack) template.
	req = (&http.Request{}).WithContext(ctx)
	req.Method = method
	req.URL = u
	req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, 1
	req.Header = header
	req.ContentLength = cl
	req.Host = host
	req.RequestURI = uri
	req.Close = closeAfter
	return req, true
}

var crlf = []byte("\r\n")

// parseLength parses a Content-Length: digits only, no sign, at most 18.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// validHost is net/http's check of a Host value's bytes, narrowed: the
// letters, digits and punctuation of names, IPv4 and bracketed IPv6
// addresses and ports.
func validHost(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.' || c == '-' || c == ':' || c == '[' || c == ']' || c == '_':
		default:
			return false
		}
	}
	return true
}

func commonMethod(b []byte) string {
	switch string(b) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	case "PUT":
		return "PUT"
	case "PATCH":
		return "PATCH"
	case "DELETE":
		return "DELETE"
	case "OPTIONS":
		return "OPTIONS"
	}
	return ""
}

// commonKeys maps the spellings clients send of common field names
// (canonical and lower case) to their canonical form, with no allocation.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Anthropic-Beta", "Anthropic-Version",
		"Anthropic-Dangerous-Direct-Browser-Access", "Authorization", "Cache-Control", "Chant-Grant",
		"Chant-Payer", "Connection", "Content-Length", "Content-Type", "Cookie", "Expect", "Host",
		"If-Modified-Since", "If-None-Match", "Keep-Alive", "Origin", "Pragma", "Referer", "Sec-Fetch-Mode",
		"Te", "Traceparent", "Transfer-Encoding", "Upgrade", "User-Agent", "X-Api-Key",
		"X-Forwarded-For", "X-Request-Id", "X-Stainless-Arch", "X-Stainless-Async", "X-Stainless-Helper-Method",
		"X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version", "X-Stainless-Retry-Count",
		"X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Timeout", "X-App", "Http2-Settings",
	} {
		m[k] = k
		m[strings.ToLower(k)] = k
	}
	return m
}()

func commonKey(b []byte) string { return commonKeys[string(b)] }
