package egress_test

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/token"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// The attacks in this file come from a box that controls its own
// requests and wants its secret's value (or its token) somewhere it
// should not be: at a host the secret is not pinned to, in an answer, or
// in the broker's log. Each is refused; none depends on the answer
// search alone where the broker chose what to write.

// hostileEnv is newEnv with ECHO pinned to a host that answers with h.
func hostileEnv(t *testing.T, h http.HandlerFunc) *env {
	t.Helper()
	e := newEnv(t, nil)
	e.echo = newHost(t, h)
	e.br.SetSecret("shop", secretName, e.echo.URL+"/base", e.value)
	return e
}

// sentValue is the credential the host received in X-Api-Key.
func sentValue(r *http.Request) string { return r.Header.Get("X-Api-Key") }

// forms are the ways a host may repeat v: as it is, escaped, encoded.
func forms(v string) map[string]string {
	return map[string]string{
		"as it is":      v,
		"query-escaped": url.QueryEscape(v),
		"base64":        base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url":     base64.RawURLEncoding.EncodeToString([]byte(v)),
		"basic":         base64.StdEncoding.EncodeToString([]byte("api:" + v)),
		"upper":         strings.ToUpper(v),
	}
}

// leaks reports which of v's forms s holds, upper case aside (a host
// that repeats a value in upper case gives no one the value).
func leaks(s, v string) []string {
	var out []string
	for name, f := range forms(v) {
		if name != "upper" && strings.Contains(s, f) {
			out = append(out, name)
		}
	}
	return out
}

func TestEgress_HostHeaderCannotChangeHost(t *testing.T) {
	e := newEnv(t, nil)
	h := http.Header{"X-Api-Key": {e.token}, "X-Forwarded-Host": {e.other.hostport()}, "Forwarded": {"host=" + e.other.hostport()},
		"X-Original-Url": {e.other.URL + "/x"}, "X-Rewrite-Url": {e.other.URL + "/x"}}
	req, err := http.NewRequest(http.MethodGet, e.br.URL+"/egress/ECHO/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Host = e.other.hostport()
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, s := range e.echo.Seen() {
		if s.Host != e.echo.hostport() || s.Header.Get("X-Forwarded-Host") != "" || s.Header.Get("Forwarded") != "" {
			t.Errorf("the host received Host %q, X-Forwarded-Host %q, Forwarded %q; want its own host and neither",
				s.Host, s.Header.Get("X-Forwarded-Host"), s.Header.Get("Forwarded"))
		}
	}
	// newEnv's cleanup fails the test if the other host was reached.
}

func TestEgress_AbsoluteFormRequestLineCannotChangeHost(t *testing.T) {
	e := newEnv(t, nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.br.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "GET %s/egress/ECHO/x HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\nConnection: close\r\n\r\n", e.other.URL, e.other.hostport(), e.token)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if got := e.echo.Seen(); len(got) != 1 || got[0].Host != e.echo.hostport() || got[0].Path != "/base/x" {
			t.Errorf("absolute form: the host received %+v, want one request for /base/x at its own host", got)
		}
	}
	if strings.Contains(string(body), e.value) {
		t.Errorf("absolute form: the answer holds the value: %s", body)
	}
}

func TestEgress_AuthorityInThePathStaysUnderTheBase(t *testing.T) {
	e := newEnv(t, nil)
	other := e.other.hostport()
	paths := []string{
		"/egress/ECHO/@" + other + "/x",
		"/egress/ECHO//" + other + "/x",
		"/egress/ECHO/%2F%2F" + other + "/x",
		"/egress/ECHO/%5C%5C" + other + "/x",
		"/egress/ECHO/..%2F..%2F" + other,
		"/egress/ECHO/x%40" + other,
		"/egress/ECHO/%40" + other + "%2Fx",
	}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			before := len(e.echo.Seen())
			resp, _ := e.do(t, http.MethodGet, p, http.Header{"X-Api-Key": {e.token}}, nil)
			for _, s := range e.echo.Seen()[before:] {
				if s.Host != e.echo.hostport() || !strings.HasPrefix(s.Path, "/base/") {
					t.Errorf("GET %s reached %s %s, want the echo host under /base/", p, s.Host, s.Path)
				}
			}
			_ = resp
		})
	}
}

func TestEgress_RedirectToAnotherHostIsNotFollowedAndCarriesNoValue(t *testing.T) {
	var otherURL string
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		v := sentValue(r)
		w.Header().Set("Location", otherURL+"/steal?k="+url.QueryEscape(v)+"&b="+base64.StdEncoding.EncodeToString([]byte(v)))
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	otherURL = e.other.URL
	for _, code := range []string{"GET", "POST"} {
		resp, body := e.do(t, code, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, strings.NewReader("{}"))
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusTemporaryRedirect || !strings.Contains(loc, url.QueryEscape(e.token)) {
			t.Errorf("%s: answer %d Location %q, want the 307 passed back with the box's token in the value's place", code, resp.StatusCode, loc)
		}
		if l := leaks(loc+string(body), e.value); len(l) > 0 {
			t.Errorf("%s: the redirect carries the value (%v): %q", code, l, loc)
		}
	}
}

func TestEgress_ValueInAnswerHeadersNeverReachesTheBox(t *testing.T) {
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		v := sentValue(r)
		f := forms(v)
		w.Header().Set("Set-Cookie", "session="+v+"; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "b64="+f["base64"])
		w.Header().Set("Www-Authenticate", `Bearer realm="x", error="invalid_token", error_description="`+v+` is revoked"`)
		w.Header().Set("Location", "/base/next?key="+f["query-escaped"])
		w.Header().Set("Content-Location", "https://elsewhere.example/"+f["base64url"])
		w.Header().Set("Link", "<https://elsewhere.example/?k="+f["query-escaped"]+">; rel=next")
		w.Header().Set("X-Basic", "Basic "+f["basic"])
		w.Header().Set("Trailer", "X-Declared")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "ok")
		w.Header().Set("X-Declared", v)
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", f["base64"])
	})
	resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, nil)
	all := fmt.Sprint(resp.Header) + fmt.Sprint(resp.Trailer) + string(body)
	if l := leaks(all, e.value); len(l) > 0 {
		t.Errorf("the answer carries the value (%v): %s", l, all)
	}
	if !strings.Contains(resp.Header.Get("Set-Cookie"), e.token) || resp.Trailer.Get("X-Declared") != e.token {
		t.Errorf("Set-Cookie %q, trailer %q: want the box's token in the value's place", resp.Header.Get("Set-Cookie"), resp.Trailer.Get("X-Declared"))
	}
}

func TestEgress_ValueInEncodedAnswerBodiesNeverReachesTheBox(t *testing.T) {
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		v := sentValue(r)
		f := forms(v)
		text := "a " + v + " b " + f["query-escaped"] + " c " + f["base64"] + " d " + f["basic"] + ` e {"k":"` + strings.ReplaceAll(v, "_", `\u005f`) + `"}`
		switch r.URL.Query().Get("enc") {
		case "gzip-members":
			// The value split across two gzip members, each flushed.
			w.Header().Set("Content-Encoding", "gzip")
			half := len(text) / 2
			for _, part := range []string{text[:half], text[half:]} {
				zw := gzip.NewWriter(w)
				_, _ = io.WriteString(zw, part)
				_ = zw.Close()
				w.(http.Flusher).Flush()
			}
		case "deflate":
			w.Header().Set("Content-Encoding", "deflate")
			fw, _ := flate.NewWriter(w, flate.BestSpeed)
			_, _ = io.WriteString(fw, text)
			_ = fw.Close()
		case "br":
			w.Header().Set("Content-Encoding", "br")
			_, _ = io.WriteString(w, text)
		case "gzip-twice":
			w.Header().Add("Content-Encoding", "gzip")
			w.Header().Add("Content-Encoding", "identity")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, text)
			_ = zw.Close()
		case "byte-chunks":
			for i := range len(text) {
				_, _ = io.WriteString(w, text[i:i+1])
				w.(http.Flusher).Flush()
			}
		}
	})
	for _, enc := range []string{"gzip-members", "deflate", "br", "gzip-twice", "byte-chunks"} {
		t.Run(enc, func(t *testing.T) {
			resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x?enc="+enc, http.Header{"X-Api-Key": {e.token}, "Accept-Encoding": {"gzip, deflate, br"}}, nil)
			b := body
			if resp.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err == nil {
					b, _ = io.ReadAll(zr)
				}
			}
			if l := leaks(fmt.Sprint(resp.Header)+string(b), e.value); len(l) > 0 {
				t.Errorf("%s: the answer carries the value (%v): %d %s", enc, l, resp.StatusCode, b)
			}
		})
	}
}

// TestEgress_ContentEncodingRefusalMakesNoValue: an answer whose
// Content-Encoding repeats the value in upper case is refused, and the
// refusal, which quotes the header, must not write it in lower case: a
// value the host wrote in no form the broker looks for would become the
// value itself.
func TestEgress_ContentEncodingRefusalMakesNoValue(t *testing.T) {
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		v := strings.ToUpper(sentValue(r))
		if r.URL.Query().Get("stacked") != "" {
			w.Header().Set("Content-Encoding", "gzip, "+v)
		} else {
			w.Header().Set("Content-Encoding", v)
		}
		_, _ = io.WriteString(w, "x")
	})
	for _, q := range []string{"", "?stacked=1"} {
		resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x"+q, http.Header{"X-Api-Key": {e.token}}, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("GET %s = %d, want 502", q, resp.StatusCode)
		}
		if l := leaks(fmt.Sprint(resp.Header)+string(body), e.value); len(l) > 0 {
			t.Errorf("GET %s: the refusal carries the value (%v): %s", q, l, body)
		}
	}
}

// TestEgress_MalformedAnswerRepeatingTheCredentialIsNotLogged: a host
// that answers with what it received as its status line makes the
// transport's error quote it; the log line of that error must hold no
// form of what the broker sent (the value, its Basic credentials).
func TestEgress_MalformedAnswerRepeatingTheCredentialIsNotLogged(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecret("shop", secretName, "http://"+upstreamtest.EchoStatus(t)+"/base", e.value)
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("api:"+e.token))
	for _, h := range []http.Header{{"Authorization": {basic}}, {"X-Api-Key": {e.token}}, {"Authorization": {"Bearer " + e.token}}} {
		resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x?key="+e.token, h, nil)
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("status %d %s, want 502", resp.StatusCode, body)
		}
		if l := leaks(fmt.Sprint(resp.Header)+string(body), e.value); len(l) > 0 {
			t.Errorf("the refusal carries the value (%v): %s", l, body)
		}
	}
	if l := leaks(e.logs.String(), e.value); len(l) > 0 {
		t.Errorf("the log holds the value (%v): %s", l, e.logs.String())
	}
	if l := leaks(e.logs.String(), e.token); len(l) > 0 {
		t.Errorf("the log holds the box's token (%v): %s", l, e.logs.String())
	}
}

// TestEgress_ValueAsAnAnswerHeaderNameNeverReachesTheBox: a host that
// repeats the value in a header's name has it canonicalized by the
// transport (X-Sk_live_…, its case changed); the header must still not
// reach the box.
func TestEgress_ValueAsAnAnswerHeaderNameNeverReachesTheBox(t *testing.T) {
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["x-"+sentValue(r)] = []string{"1"}
		w.Header()[sentValue(r)] = []string{"2"}
		w.Header()["X-B64-"+forms(sentValue(r))["base64"]] = []string{"3"}
		_, _ = io.WriteString(w, "ok")
	})
	resp, _ := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, nil)
	for k := range resp.Header {
		if strings.Contains(strings.ToLower(k), strings.ToLower(e.value)) || len(leaks(k, e.value)) > 0 {
			t.Errorf("the answer has a header named %q, which holds the value", k)
		}
	}
}

// TestEgress_ProposalNeverHoldsADoublyEncodedToken: a path outside the
// secret's rules, in ask mode, holding the box's token percent-encoded
// twice (%2562bx_…), which the rules read decoded, opens no proposal:
// the refusal's words, which a proposal keeps as its reason and a
// webhook carries away, quote the path as the rules read it.
func TestEgress_ProposalNeverHoldsADoublyEncodedToken(t *testing.T) {
	e := askEnv(t)
	for _, p := range []string{"/x/%2562" + e.token[1:], "/x/%252562" + e.token[1:], "/x/a%252F" + e.token} {
		code, msg, reached := e.post(t, p)
		if code != http.StatusForbidden || reached != 0 {
			t.Errorf("POST %s = %d (host reached %d times), want 403 and none", p, code, reached)
		}
		if strings.Contains(msg, e.token) {
			t.Errorf("POST %s: the refusal quotes the box's token", p)
		}
	}
	r := e.br.Admin("GET", "/api/proposals?box=shop", e.br.AdminToken, nil)
	if strings.Contains(string(r.Body), e.token) || strings.Contains(string(r.Body), e.token[4:]) {
		t.Errorf("a proposal holds the box's token: %s", r.Body)
	}
}

// TestEgress_MalformedTrailerRepeatingTheValueIsNotLogged: a host that
// answers 200 and ends its chunked body with a malformed trailer line
// repeating the value it was sent makes the body's read fail, after the
// answer began, with an error that quotes the line; the log holds no form
// of the value.
func TestEgress_MalformedTrailerRepeatingTheValueIsNotLogged(t *testing.T) {
	e := hostileEnv(t, func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n%s\r\n\r\n", sentValue(r))
	})
	// The answer may begin before its body breaks off, and then end the
	// connection mid-body: what the box read is judged whole, whether or
	// not the read ended in an error.
	req, err := http.NewRequest(http.MethodGet, e.br.URL+"/egress/ECHO/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", e.token)
	if resp, err := noRedirects.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if l := leaks(fmt.Sprint(resp.Header)+string(body), e.value); len(l) > 0 {
			t.Errorf("the answer carries the value (%v): %s", l, body)
		}
	}
	if !strings.Contains(e.logs.String(), "malformed MIME header") {
		t.Fatalf("the log holds no read error, so this test shows nothing:\n%s", e.logs.String())
	}
	if l := leaks(e.logs.String(), e.value); len(l) > 0 {
		t.Errorf("the log holds the value (%v):\n%s", l, e.logs.String())
	}
}

// TestEgress_ProposalNeverHoldsAnotherToken: a box whose token was
// rotated with a grace holds two live tokens; it sends its request with
// the new one and writes the old one, a grant or another box's token
// into a path outside the secret's rules, plainly or encoded, for the
// proposal (shown on the owner's page, listed by the CLI, sent by the
// webhook) to keep it. None is kept.
func TestEgress_ProposalNeverHoldsAnotherToken(t *testing.T) {
	e := askEnv(t)
	old := e.token
	var rotated operator.BoxToken
	r := e.br.Admin("POST", "/api/boxes/shop/token", e.br.AdminToken, map[string]string{"grace": "1h"})
	if r.StatusCode != http.StatusOK || json.Unmarshal(r.Body, &rotated) != nil || rotated.Token == "" {
		t.Fatalf("POST /api/boxes/shop/token = %d %s", r.StatusCode, r.Body)
	}
	e.token = rotated.Token
	e.br.Sync()
	other := e.br.AddBox("other")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{old, other, grant}
	for _, p := range []string{"/x/" + old, "/x/%252562" + old[1:], "/x/" + other, "/x/%252562" + other[1:], "/x/a/" + grant, "/x/a/bbg%255F" + grant[4:]} {
		if code, _, reached := e.post(t, p); code != http.StatusForbidden || reached != 0 {
			t.Errorf("POST %s = %d (host reached %d times), want 403 and none", p, code, reached)
		}
	}
	r = e.br.Admin("GET", "/api/proposals?box=shop", e.br.AdminToken, nil)
	for _, tok := range tokens {
		if strings.Contains(string(r.Body), tok[4:]) {
			t.Errorf("a proposal holds a token (%s…): %s", tok[:4], r.Body)
		}
	}
}

// TestEgress_TokenInManyPlacesIsRefused: a box writes its token a
// thousand times into its request's head (a header, Basic credentials,
// the query) or into a form or JSON body naming the secret's field as
// often, for the broker to write a 16 KiB value in each place: a request
// of 64 KiB would have the broker make, and send, hundreds of megabytes,
// up to --box-concurrent such requests at once. The broker writes the
// value in at most 16 places of one request; past them the request is a
// 400, and nothing reaches the host. A request with the token in a few
// places still goes, the value in each.
func TestEgress_TokenInManyPlacesIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	value := strings.Repeat("v", 16<<10)
	e.br.SetSecret("shop", secretName, e.echo.URL+"/base", value, "client_secret")
	many := func(s, sep string) string { return strings.TrimSuffix(strings.Repeat(s+sep, 600), sep) }
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-Api-Key": {e.token}}
	jsonHead := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {e.token}}
	tests := []struct {
		name   string
		query  string
		header http.Header
		body   string
	}{
		{"a header", "", http.Header{"X-Api-Key": {many(e.token, " ")}}, ""},
		{"repeated headers", "", http.Header{"X-Api-Key": strings.Split(many(e.token, "\n"), "\n")}, ""},
		{"basic credentials", "", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+many(e.token, ",")))}}, ""},
		{"the query", "?" + many("key="+e.token, "&"), nil, ""},
		{"a form's named field", "", form, many("client_secret="+e.token, "&")},
		{"a JSON body's named field", "", jsonHead, "{" + many(`"client_secret":"`+e.token+`"`, ",") + "}"},
		{"sixteen in the head, one in the body", "?" + many("key="+e.token, "&")[:15*len("key="+e.token+"&")-1], form, "client_secret=" + e.token},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			method := http.MethodGet
			var body io.Reader
			if tt.body != "" {
				method, body = http.MethodPost, strings.NewReader(tt.body)
			}
			resp, b := e.do(t, method, "/egress/"+secretName+"/x"+tt.query, tt.header, body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "at most 16 places") {
				t.Errorf("status %d, body %.300s; want 400 saying the broker writes the value in at most 16 places", resp.StatusCode, b)
			}
			if n := len(e.echo.Seen()) - before; n != 0 {
				t.Errorf("the host received %d requests, want none", n)
			}
		})
	}

	resp, _ := e.do(t, http.MethodPost, "/egress/"+secretName+"/x?key="+e.token,
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "X-Api-Key": {e.token}, "Authorization": {"Bearer " + e.token}},
		strings.NewReader("client_secret="+e.token))
	seen := e.echo.Seen()
	if resp.StatusCode != http.StatusOK || len(seen) == 0 {
		t.Fatalf("a request with the token in four places: status %d, the host received %d requests", resp.StatusCode, len(seen))
	}
	s := seen[len(seen)-1]
	if s.Header.Get("X-Api-Key") != value || s.Header.Get("Authorization") != "Bearer "+value || !strings.Contains(s.RawQuery, "key="+value) {
		t.Errorf("the host did not receive the value in the header, Authorization and the query")
	}
}
