package egress

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/intentius/boxbroker/internal/token"
)

// tokenRE matches a box token as boxbroker mints them: the prefix and 43
// base64url characters (a longer run is returned whole, and is no box's).
var tokenRE = regexp.MustCompile(regexp.QuoteMeta(token.BoxPrefix) + `[A-Za-z0-9_-]{43,}`)

// FindTokens returns every box token r carries wherever an API might
// expect its key: in any request header (Authorization: Bearer, Basic
// user or password, or raw; x-api-key; any other), in the query's keys
// and values (decoded), and in the path, so that a token put there is
// refused with a message rather than taken for no token at all. When it
// finds none it returns the Bearer and x-api-key values, so an unknown
// token is refused as unknown.
func (c *Capability) FindTokens(r *http.Request) []string {
	var found []string
	scan := func(s string) {
		if strings.Contains(s, token.BoxPrefix) {
			found = append(found, tokenRE.FindAllString(s, -1)...)
		}
	}
	for k, vs := range r.Header {
		scan(k)
		for _, v := range vs {
			scan(v)
			if dec, ok := basicCredentials(v); ok {
				scan(dec)
			}
		}
	}
	for _, part := range queryParts(r.URL.RawQuery) {
		scan(part)
	}
	scan(r.URL.Path)
	if len(found) > 0 {
		return found
	}
	return token.AppendSent(found, r.Header)
}

// basicCredentials decodes an Authorization value of the Basic scheme to
// "user:password".
func basicCredentials(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(dec), true
}

// queryParts returns every key and value of a raw query, decoded (or as
// sent, where it does not decode).
func queryParts(raw string) []string {
	var out []string
	for _, pair := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		for _, s := range []string{k, v} {
			if d, err := url.QueryUnescape(s); err == nil {
				out = append(out, d)
			} else {
				out = append(out, s)
			}
		}
	}
	return out
}

// swapHeaders puts value wherever token appears in h's values, inside
// Basic credentials too, and deletes a header whose name holds token.
func swapHeaders(h http.Header, token, value string) {
	for k, vs := range h {
		if strings.Contains(k, token) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			if dec, ok := basicCredentials(v); ok && strings.Contains(dec, token) {
				scheme, _, _ := strings.Cut(strings.TrimSpace(v), " ")
				v = scheme + " " + base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(dec, token, value)))
			}
			vs[i] = strings.ReplaceAll(v, token, value)
		}
	}
}

// swapQuery puts value wherever token appears in a raw query's keys and
// values, decoded, and leaves every other part exactly as it was sent.
func swapQuery(raw, token, value string) string {
	if raw == "" {
		return ""
	}
	swap := func(s string) string {
		d, err := url.QueryUnescape(s)
		if err != nil {
			return strings.ReplaceAll(s, token, url.QueryEscape(value))
		}
		if !strings.Contains(d, token) {
			return s
		}
		return url.QueryEscape(strings.ReplaceAll(d, token, value))
	}
	pairs := strings.Split(raw, "&")
	for i, pair := range pairs {
		k, v, eq := strings.Cut(pair, "=")
		if eq {
			pairs[i] = swap(k) + "=" + swap(v)
		} else {
			pairs[i] = swap(k)
		}
	}
	return strings.Join(pairs, "&")
}

// carries reports whether req still holds token anywhere the broker
// looks: its URL (path and query, raw and decoded), Host, and every
// header's name and value, Basic credentials decoded.
func carries(req *http.Request, token string) bool {
	u := req.URL
	if strings.Contains(u.Path, token) || strings.Contains(u.RawPath, token) || strings.Contains(u.RawQuery, token) ||
		strings.Contains(req.Host, token) || strings.Contains(u.Host, token) {
		return true
	}
	for _, part := range queryParts(u.RawQuery) {
		if strings.Contains(part, token) {
			return true
		}
	}
	for k, vs := range req.Header {
		if strings.Contains(k, token) {
			return true
		}
		for _, v := range vs {
			if strings.Contains(v, token) {
				return true
			}
			if dec, ok := basicCredentials(v); ok && strings.Contains(dec, token) {
				return true
			}
		}
	}
	return false
}
