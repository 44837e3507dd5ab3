package egress

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// FindTokens returns every box token r carries wherever an API might
// expect its key: in any request header (Authorization: Bearer, Basic
// user or password, or raw; x-api-key; any other), in the query's keys
// and values (decoded), in the path, so that a token put there is
// refused with a message rather than taken for no token at all. Each is
// searched as sent and with percent- and JSON escapes decoded; and the
// tokens FindBodyTokens found, for a request whose head holds none.
// (A token in the body as well is marked, or swapped in a field the
// secret names, as the body is forwarded.) When it finds
// none it returns the Bearer and x-api-key values, so an unknown token
// is refused as unknown.
func (c *Capability) FindTokens(r *http.Request) []string {
	var found []string
	scan := func(s string) {
		s = unescapeLoose(s)
		found = token.AppendFound(found, s, token.BoxPrefix)
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
	found = append(found, bodyTokens(r)...)
	if len(found) > 0 {
		return found
	}
	return token.AppendSent(found, r.Header)
}

// NoTokenRefusal is egress's refusal of a request that carries no token:
// a 401 with WWW-Authenticate: Basic, which git needs before it sends the
// credentials in its URL, naming every place a token may go.
func (c *Capability) NoTokenRefusal(r *http.Request) *capability.Error {
	realm := "boxbroker egress"
	if name, _, ok := split(r.URL); ok {
		realm += " " + name
	}
	e := capability.Refuse(capability.ReasonToken,
		"The request carries no box token. On egress, send it wherever the API takes its key: Authorization: Bearer <token>, Basic credentials (as user or password), x-api-key or another header, or a query parameter such as ?key=<token>. A token in the body is swapped for the value only as the whole value of a top-level form or JSON field the secret names (secret set --body-field); a token only there is found in such a body of at most 64 KiB with its length declared.").At(http.StatusUnauthorized)
	e.Header = http.Header{"Www-Authenticate": {`Basic realm="` + realm + `"`}}
	return e
}

// basicCredentials is token.BasicCredentials, by a name the functions
// below (whose token parameter hides the package) can call.
var basicCredentials = token.BasicCredentials

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

// tokenForm is the box's token as the broker finds it: as it is, or
// with any of its bytes percent-, JSON- or HTML-escaped (%62bx_…,
// bbx\u005f…, &#98;bx_…), put in place by value.
func tokenForm(token, value string) []proxy.Form {
	return []proxy.Form{{Old: []byte(token), New: []byte(value), Escaped: true}}
}

// othersGo reports whether tokens other than the box's (a grant, an
// admin token, any box's) may be left as they are in what goes to the
// host: only when value itself is written like one, where replacing
// them would replace the value too. Otherwise each is replaced by a
// proxy.TokenMarker of its own length, as on every other route.
func othersGo(value string) bool {
	_, n := proxy.ScrubTokens(value)
	return n > 0
}

// scrubOthers replaces, in s, every token other than the box's that
// goes to the host (see othersGo), after the box's has been swapped.
func scrubOthers(s, value string) string {
	if othersGo(value) {
		return s
	}
	out, _ := proxy.ScrubTokens(s)
	return out
}

// swapString puts value wherever token appears in s, escaped or not.
func swapString(s, token, value string) string {
	if !strings.Contains(s, token) && !strings.ContainsAny(s, "%\\&") {
		return s
	}
	out, _ := proxy.RedactString(s, tokenForm(token, value))
	return out
}

// holds reports whether s holds token, escaped or not.
func holds(s, token string) bool { return count(s, token) > 0 }

// count is how many times s holds token, escaped or not: how many
// times swapString writes a value in it.
func count(s, token string) int {
	_, n := proxy.RedactString(s, tokenForm(token, ""))
	return n
}

// maxWrites bounds the places of one request the broker writes a
// secret's value in (swapHeaders, swapQuery, swapBody). Each is a value
// of up to 16 KiB (operator.MaxValue, mint.MaxToken), written where the
// box wrote its token of some 50 bytes: a request head of 64 KiB holding
// the token a thousand times, or a form of 1 MiB naming its field as
// often, would have the broker make and send hundreds of megabytes for
// it. An API takes its key in one place, or two.
const maxWrites = 16

// headWrites is how many places of r's head swapHeaders and swapQuery
// would write the value in: each time a header value, the Basic
// credentials one decodes to, or a key or value of the query (decoded)
// holds token, escaped or not. A header the broker drops is counted too.
func headWrites(r *http.Request, token string) int {
	n := 0
	for _, vs := range r.Header {
		for _, v := range vs {
			n += count(v, token)
			if dec, ok := basicCredentials(v); ok {
				n += count(dec, token)
			}
		}
	}
	for _, part := range queryParts(r.URL.RawQuery) {
		n += count(part, token)
	}
	return n
}

// tooManyWrites is the refusal of a request that would have the broker
// write the value of the secret name in n places, more than maxWrites.
func tooManyWrites(name string, n int) *capability.Error {
	return capability.Refuse(capability.ReasonInvalid,
		"The request carries the box's token in %d places where the broker would write %s's value (header values, the query, body fields the secret names); the broker writes it in at most %d places of one request, and this one was not sent.",
		n, name, maxWrites)
}

// basicSwap is one Authorization: Basic value the broker rewrote: what
// it sent the host, and what the box sent it.
type basicSwap struct{ sent, box string }

// swapHeaders puts value wherever token appears in h's values, escaped
// or not, inside Basic credentials too, and deletes a header whose name
// holds token. It returns the Basic credentials it encoded, so that an
// answer repeating them can be given the box's own back.
func swapHeaders(h http.Header, token, value string) []basicSwap {
	var basics []basicSwap
	for k, vs := range h {
		if holds(k, token) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			if dec, ok := basicCredentials(v); ok && holds(dec, token) {
				scheme, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
				sent := base64.StdEncoding.EncodeToString([]byte(swapString(dec, token, value)))
				basics = append(basics, basicSwap{sent: sent, box: strings.TrimSpace(cred)})
				v = scheme + " " + sent
			}
			vs[i] = swapString(v, token, value)
		}
	}
	return basics
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
			return swapString(s, token, url.QueryEscape(value))
		}
		if !holds(d, token) {
			return s
		}
		return url.QueryEscape(swapString(d, token, value))
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
// header (headerHolds); or its base64, in either alphabet and however
// aligned (base64Cores), in the path, a query part (decoded), or a
// header's name or value, where the broker swaps nothing: as
// Elasticsearch's ApiKey (base64 of id:key), Docker's X-Registry-Auth
// (base64 of a JSON document) or Basic credentials not padded write it.
func carries(req *http.Request, token string) bool {
	u := req.URL
	if strings.Contains(u.Path, token) || strings.Contains(u.RawPath, token) || strings.Contains(u.RawQuery, token) ||
		strings.Contains(req.Host, token) || strings.Contains(u.Host, token) {
		return true
	}
	cores := base64Cores(token)
	encoded := func(s string) bool {
		return slices.ContainsFunc(cores, func(c string) bool { return strings.Contains(s, c) })
	}
	if encoded(u.Path) || encoded(u.RawPath) {
		return true
	}
	for _, part := range queryParts(u.RawQuery) {
		if holds(part, token) || encoded(part) {
			return true
		}
	}
	for k, vs := range req.Header {
		if headerHolds(k, vs, token) || encoded(k) || slices.ContainsFunc(vs, encoded) {
			return true
		}
	}
	return false
}

// headerHolds reports whether the header k, with the values vs, holds
// token, escaped or not: in its name, a value, or the Basic credentials
// a value decodes to.
func headerHolds(k string, vs []string, token string) bool {
	if holds(k, token) {
		return true
	}
	for _, v := range vs {
		if dec, ok := basicCredentials(v); holds(v, token) || ok && holds(dec, token) {
			return true
		}
	}
	return false
}

// dropToken deletes every header of h that holds token (headerHolds):
// for a signing kind, which has no value to put in its place.
func dropToken(h http.Header, token string) {
	for k, vs := range h {
		if headerHolds(k, vs, token) {
			delete(h, k)
		}
	}
}
