package egress_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
)

// seen is one request a host received; the body is not kept.
type seen struct {
	Method, Host, Path, RawPath, RawQuery string
	Header                                http.Header
}

// dump is everything of the request the host saw, for a token search.
func (s seen) dump() string {
	var b strings.Builder
	b.WriteString(s.Method + " " + s.Host + " " + s.Path + " " + s.RawPath + "?" + s.RawQuery + "\n")
	for k, vs := range s.Header {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
		for _, v := range vs {
			if strings.HasPrefix(v, "Basic ") {
				dec, _ := base64.StdEncoding.DecodeString(v[6:])
				b.WriteString(" basic: " + string(dec) + "\n")
			}
		}
	}
	return b.String()
}

// host is a recording stand-in for a secret's host.
type host struct {
	*httptest.Server
	mu   sync.Mutex // guards seen
	seen []seen
}

func newHost(t testing.TB, h http.HandlerFunc) *host {
	t.Helper()
	ho := &host{}
	ho.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ho.mu.Lock()
		ho.seen = append(ho.seen, seen{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone()})
		ho.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(ho.Close)
	return ho
}

func (ho *host) Seen() []seen {
	ho.mu.Lock()
	defer ho.mu.Unlock()
	return append([]seen(nil), ho.seen...)
}

func (ho *host) hostport() string { return strings.TrimPrefix(ho.URL, "http://") }

// echo is the egress stand-in host. It repeats the Authorization it
// received in X-Echo-Authorization and answers JSON of what it received;
// the query's "do" asks for something else.
func echo(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	w.Header().Set("X-Echo-Authorization", auth)
	q := r.URL.Query()
	switch q.Get("do") {
	case "redirect":
		http.Redirect(w, r, q.Get("to"), http.StatusFound)
		return
	case "locate":
		// Where to go next, the key in the query.
		http.Redirect(w, r, "/next?key="+url.QueryEscape(r.Header.Get("X-Api-Key")), http.StatusSeeOther)
		return
	case "stream":
		// The authorization three bytes at a time, flushed, then in a trailer.
		w.Header().Set("Trailer", "X-Echo-Trailer")
		w.Header().Set("Content-Type", "text/plain")
		body := []byte("before " + auth + " after")
		for i := 0; i < len(body); i += 3 {
			_, _ = w.Write(body[i:min(i+3, len(body))])
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Echo-Trailer", auth)
		return
	case "gzip":
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, "zipped "+auth)
		_ = zw.Close()
		return
	case "brotli":
		w.Header().Set("Content-Encoding", "br")
		_, _ = io.WriteString(w, "not really brotli "+auth)
		return
	case "early":
		w.Header().Set("Link", "</style.css?k="+auth+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
	case "download":
		n, _ := strconv.ParseInt(q.Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := bytes.Repeat([]byte("0123456789abcdef"), 2048)
		for n > 0 {
			k, err := w.Write(buf[:min(int64(len(buf)), n)])
			if err != nil {
				return
			}
			n -= int64(k)
		}
		return
	case "upload":
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"received":%d}`, n)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "header": r.Header,
	})
}

const secretName = "ECHO"

// env is a broker with one box that declares ECHO, whose value goes only
// to the echo host, and a second host that must never be reached.
type env struct {
	br          *brokertest.Broker
	token       string
	value       string
	echo, other *host
	logs        *brokertest.Buffer
}

func newEnv(t testing.TB, configure func(*server.Config)) *env {
	t.Helper()
	e := &env{logs: &brokertest.Buffer{}}
	e.echo = newHost(t, echo)
	e.other = newHost(t, echo)
	e.br = brokertest.New(t, brokertest.Options{Logs: e.logs, Config: configure})
	e.token = e.br.AddBox("shop")
	e.value = "sk_live_" + randomHex(16)
	e.br.SetSecret("shop", secretName, e.echo.URL+"/base", e.value)
	e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "UNHELD"))
	t.Cleanup(func() {
		for _, s := range append(e.echo.Seen(), e.other.Seen()...) {
			if strings.Contains(s.dump(), e.token) {
				t.Errorf("a host received the box's token: %s", s.dump())
			}
		}
		if len(e.other.Seen()) > 0 {
			t.Errorf("the other host received %d requests, want none", len(e.other.Seen()))
		}
		if l := e.logs.String(); strings.Contains(l, e.value) || strings.Contains(l, e.token) {
			t.Errorf("the broker's logs hold the value or the token")
		}
	})
	return e
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// do sends a request to the broker and reads the whole answer.
func (e *env) do(t *testing.T, method, path string, header http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.br.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, b
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestEgress_Forwards(t *testing.T) {
	e := newEnv(t, nil)
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		name   string
		path   string
		header http.Header
		// want is where the host must find the value.
		want func(s seen) (string, string)
	}{
		{"bearer", "/egress/ECHO/v1/charges?limit=3", http.Header{"Authorization": {"Bearer " + e.token}},
			func(s seen) (string, string) { return s.Header.Get("Authorization"), "Bearer " + e.value }},
		{"x-api-key", "/egress/ECHO/v1/charges?limit=3", http.Header{"X-Api-Key": {e.token}},
			func(s seen) (string, string) { return s.Header.Get("X-Api-Key"), e.value }},
		{"custom header", "/egress/ECHO/v1/charges?limit=3", http.Header{"X-Goog-Api-Key": {e.token}},
			func(s seen) (string, string) { return s.Header.Get("X-Goog-Api-Key"), e.value }},
		{"token inside a header", "/egress/ECHO/v1/charges?limit=3", http.Header{"Authorization": {"Token token=" + e.token + ", v=2"}},
			func(s seen) (string, string) {
				return s.Header.Get("Authorization"), "Token token=" + e.value + ", v=2"
			}},
		{"basic password", "/egress/ECHO/v1/charges?limit=3", http.Header{"Authorization": {basic("api", e.token)}},
			func(s seen) (string, string) { return s.Header.Get("Authorization"), basic("api", e.value) }},
		{"basic user", "/egress/ECHO/v1/charges?limit=3", http.Header{"Authorization": {basic(e.token, "")}},
			func(s seen) (string, string) { return s.Header.Get("Authorization"), basic(e.value, "") }},
		{"query parameter", "/egress/ECHO/v1/charges?key=" + e.token + "&limit=3", nil,
			func(s seen) (string, string) { return s.RawQuery, "key=" + url.QueryEscape(e.value) + "&limit=3" }},
		{"encoded query parameter", "/egress/ECHO/v1/charges?key=%62bx_" + e.token[4:] + "&limit=3", nil,
			func(s seen) (string, string) { return s.RawQuery, "key=" + url.QueryEscape(e.value) + "&limit=3" }},
		{"header and query at once", "/egress/ECHO/v1/charges?key=" + e.token + "&limit=3", http.Header{"Authorization": {"Bearer " + e.token}},
			func(s seen) (string, string) {
				return s.Header.Get("Authorization") + " " + s.RawQuery, "Bearer " + e.value + " key=" + url.QueryEscape(e.value) + "&limit=3"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			h := tt.header.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Cookie", "session=box")
			h.Set("Chant-Grant", "grant-value")
			h.Set("Connection", "X-Hop")
			h.Set("X-Hop", "dropped")
			h.Set("X-Kept", "kept")
			resp, body := e.do(t, http.MethodPost, tt.path, h, strings.NewReader(`{"amount":100}`))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s = %d %s, want 200", tt.path, resp.StatusCode, body)
			}
			got := e.echo.Seen()[before:]
			if len(got) != 1 {
				t.Fatalf("the echo host received %d requests, want 1", len(got))
			}
			s := got[0]
			if g, w := tt.want(s); g != w {
				t.Errorf("the host received %q, want %q", g, w)
			}
			if s.Path != "/base/v1/charges" || s.Host != e.echo.hostport() || !strings.HasSuffix(s.RawQuery, "limit=3") {
				t.Errorf("the host received %s %s?%s, want %s /base/v1/charges?...limit=3", s.Host, s.Path, s.RawQuery, e.echo.hostport())
			}
			for _, k := range []string{"Cookie", "Chant-Grant", "X-Hop", "Proxy-Authorization"} {
				if v := s.Header.Get(k); v != "" {
					t.Errorf("the host received %s: %q, want it dropped", k, v)
				}
			}
			if s.Header.Get("X-Kept") != "kept" {
				t.Errorf("the host received X-Kept %q, want kept", s.Header.Get("X-Kept"))
			}
			if strings.Contains(string(body), e.value) || strings.Contains(fmt.Sprint(resp.Header), e.value) {
				t.Errorf("the answer carries the value: %s %s", resp.Header, body)
			}
			if a := s.Header.Get("Authorization"); a != "" {
				if g, w := resp.Header.Get("X-Echo-Authorization"), h.Get("Authorization"); g != w {
					t.Errorf("X-Echo-Authorization = %q, want %q (what the box sent, back in the value's place)", g, w)
				}
			}
		})
	}
}

func TestEgress_AnswersNeverCarryTheValue(t *testing.T) {
	e := newEnv(t, nil)
	bearer := http.Header{"Authorization": {"Bearer " + e.token}}
	t.Run("body", func(t *testing.T) {
		_, body := e.do(t, http.MethodGet, "/egress/ECHO/x", bearer, nil)
		if !strings.Contains(string(body), "Bearer "+e.token) || strings.Contains(string(body), e.value) {
			t.Errorf("answer body = %s, want the token in the value's place", body)
		}
	})
	t.Run("streamed body split across chunks, and trailer", func(t *testing.T) {
		resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x?do=stream", bearer, nil)
		if want := "before Bearer " + e.token + " after"; string(body) != want {
			t.Errorf("streamed body = %q, want %q", body, want)
		}
		if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 {
			t.Errorf("streamed answer: Content-Length %d, Transfer-Encoding %q, want chunked", resp.ContentLength, resp.TransferEncoding)
		}
		if g := resp.Trailer.Get("X-Echo-Trailer"); g != "Bearer "+e.token {
			t.Errorf("trailer = %q, want %q", g, "Bearer "+e.token)
		}
	})
	t.Run("gzip body", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, e.br.URL+"/egress/ECHO/x?do=gzip", nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			if r, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		body, _ := io.ReadAll(r)
		if want := "zipped Bearer " + e.token; string(body) != want {
			t.Errorf("gzip answer = %q, want %q", body, want)
		}
	})
	t.Run("an encoding the broker cannot read is withheld", func(t *testing.T) {
		resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x?do=brotli", bearer, nil)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), e.value) {
			t.Errorf("brotli answer = %d %s, want 502 without the value", resp.StatusCode, body)
		}
	})
	t.Run("early hints", func(t *testing.T) {
		var hints []string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, h.Get("Link"))
			return nil
		}}
		req, _ := http.NewRequest(http.MethodGet, e.br.URL+"/egress/ECHO/x?do=early", nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if len(hints) != 1 || strings.Contains(hints[0], e.value) || !strings.Contains(hints[0], url.QueryEscape("Bearer "+e.token)) && !strings.Contains(hints[0], e.token) {
			t.Errorf("103 Link headers = %q, want one with the token in the value's place", hints)
		}
	})
	t.Run("escaped value in a Location", func(t *testing.T) {
		value := "sk/live+" + randomHex(8) + "=="
		e.br.SetSecret("shop", "ESCAPED", e.echo.URL, value)
		e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "ESCAPED"))
		resp, body := e.do(t, http.MethodGet, "/egress/ESCAPED/x?do=locate", http.Header{"X-Api-Key": {e.token}}, nil)
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther || loc != "/egress/ESCAPED/next?key="+e.token || strings.Contains(string(body), url.QueryEscape(value)) {
			t.Errorf("redirect = %d Location %q body %q, want 303 to /egress/ESCAPED/next?key=<token>", resp.StatusCode, loc, body)
		}
	})
	t.Run("HEAD keeps its length", func(t *testing.T) {
		resp, body := e.do(t, http.MethodHead, "/egress/ECHO/x?do=download&n=1234", bearer, nil)
		if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != 1234 {
			t.Errorf("HEAD = %d, %d bytes, Content-Length %d, want 200, 0, 1234", resp.StatusCode, len(body), resp.ContentLength)
		}
	})
}

func TestEgress_RedirectIsNotFollowed(t *testing.T) {
	e := newEnv(t, nil)
	to := e.other.URL + "/stolen"
	resp, _ := e.do(t, http.MethodGet, "/egress/ECHO/go?do=redirect&to="+url.QueryEscape(to), http.Header{"Authorization": {"Bearer " + e.token}}, nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != to {
		t.Errorf("redirect = %d Location %q, want 302 %q passed back", resp.StatusCode, resp.Header.Get("Location"), to)
	}
	// newEnv's cleanup fails the test if the other host was reached.
}

// rawRequest sends a request line and headers as written, with no client
// cleaning the target, and returns the answer.
func rawRequest(t *testing.T, brokerURL, target string, header string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(brokerURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", target, strings.TrimPrefix(brokerURL, "http://"), header)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestEgress_PathCannotChangeHost sends every escape we know of: each is
// either refused, or reaches the secret's host under its path prefix, and
// never the other host.
func TestEgress_PathCannotChangeHost(t *testing.T) {
	e := newEnv(t, nil)
	evil := e.other.hostport()
	auth := "Authorization: Bearer " + e.token + "\r\n"
	tests := []struct {
		name   string
		target string
		header string
		want   int // 400 refused, 404 not served, 200 forwarded to the secret's host
	}{
		{"dot-dot", "/egress/ECHO/../../x", "", 400},
		{"dot-dot at the end", "/egress/ECHO/a/..", "", 400},
		{"dot", "/egress/ECHO/./x", "", 400},
		{"encoded dot-dot", "/egress/ECHO/%2e%2e/%2E%2E/x", "", 400},
		{"mixed dot-dot", "/egress/ECHO/.%2e/x", "", 400},
		{"dot-dot and encoded slash", "/egress/ECHO/..%2F..%2Fx", "", 400},
		{"encoded slash then dot-dot", "/egress/ECHO/a%2F..%2F..%2Fx", "", 400},
		{"backslash dot-dot", `/egress/ECHO/..\..\x`, "", 400},
		{"encoded backslash dot-dot", "/egress/ECHO/..%5C..%5Cx", "", 400},
		{"name with an encoded slash", "/egress/ECHO%2F..%2F..%2Fx", "", 404},
		{"encoded name", "/egress/%45CHO/x", "", 404},
		{"encoded slashes to a host", "/egress/ECHO/%2F%2F" + evil + "/x", "", 200},
		{"at sign", "/egress/ECHO/@" + evil + "/x", "", 200},
		{"userinfo-like", "/egress/ECHO/user:pass@" + evil + "/x", "", 200},
		{"absolute URL in the path", "/egress/ECHO/http://" + evil + "/x", "", 200},
		{"double slash", "/egress/ECHO//" + evil + "/x", "", 200},
		{"backslashes", `/egress/ECHO/\\` + evil + `\x`, "", 200},
		{"encoded CRLF", "/egress/ECHO/x%0D%0AHost:%20" + evil, "", 200},
		{"query naming a host", "/egress/ECHO/x?url=http://" + evil + "/&host=" + evil, "", 200},
		{"absolute-form request target", "http://" + evil + "/egress/ECHO/x", "", 200},
		{"Host header of another host", "/egress/ECHO/x", "X-Forwarded-Host: " + evil + "\r\nForwarded: host=" + evil + "\r\n", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			status, body := rawRequest(t, e.br.URL, tt.target, auth+tt.header)
			if status != tt.want {
				t.Fatalf("GET %s = %d %s, want %d", tt.target, status, body, tt.want)
			}
			got := e.echo.Seen()[before:]
			if tt.want != 200 {
				if len(got) != 0 {
					t.Errorf("GET %s reached the host: %+v", tt.target, got)
				}
				if typ, msg := brokertest.Refusal([]byte(body)); typ == "" || msg == "" {
					t.Errorf("GET %s body = %s, want a refusal", tt.target, body)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("GET %s: the secret's host received %d requests, want 1", tt.target, len(got))
			}
			if s := got[0]; s.Host != e.echo.hostport() || !strings.HasPrefix(s.Path, "/base/") {
				t.Errorf("GET %s reached %s %s, want %s under /base/", tt.target, s.Host, s.Path, e.echo.hostport())
			}
			if v := got[0].Header.Get("X-Forwarded-Host") + got[0].Header.Get("Forwarded"); v != "" {
				t.Errorf("GET %s: the host received forwarding headers %q", tt.target, v)
			}
		})
	}
}

func TestEgress_Refusals(t *testing.T) {
	e := newEnv(t, nil)
	silent := e.br.AddBox("silent")
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	tests := []struct {
		name   string
		path   string
		header http.Header
		status int
		says   []string // the refusal's message holds each
	}{
		{"undeclared secret", "/egress/STRIPE/v1", bearer(e.token), 403, []string{"egress", "STRIPE"}},
		{"declared secret with no value held", "/egress/UNHELD/v1", bearer(e.token), 403, []string{"UNHELD", "holds no value"}},
		{"lower-case name", "/egress/echo/v1", bearer(e.token), 404, nil},
		{"no name", "/egress//v1", bearer(e.token), 404, nil},
		{"the prefix alone", "/egress", bearer(e.token), 404, nil},
		{"unknown token", "/egress/ECHO/v1", bearer("bbx_" + strings.Repeat("A", 43)), 403, []string{"no box's token"}},
		{"unknown token of another shape", "/egress/ECHO/v1", bearer("sk-something"), 403, []string{"no box's token"}},
		{"no token", "/egress/ECHO/v1", nil, 401, []string{"no box token", "Bearer", "Basic", "x-api-key", "query"}},
		{"two tokens", "/egress/ECHO/v1?key=" + silent, bearer(e.token), 403, []string{"two different tokens"}},
		{"box that never reported", "/egress/ECHO/v1", bearer(silent), 403, []string{"no declaration"}},
		{"token in the path", "/egress/ECHO/bot" + e.token + "/getMe", nil, 400, []string{"in the path"}},
		{"websocket upgrade", "/egress/ECHO/ws", http.Header{"Authorization": {"Bearer " + e.token}, "Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, 501, []string{"WebSocket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			resp, body := e.do(t, http.MethodGet, tt.path, tt.header, nil)
			if resp.StatusCode != tt.status {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, resp.StatusCode, body, tt.status)
			}
			_, msg := brokertest.Refusal(body)
			for _, w := range tt.says {
				if !strings.Contains(msg, w) {
					t.Errorf("GET %s refusal = %q, want it to say %q", tt.path, msg, w)
				}
			}
			if n := len(e.echo.Seen()) - before; n != 0 {
				t.Errorf("GET %s reached the host %d times, want none", tt.path, n)
			}
		})
	}
}

func TestEgress_BodyOverTheBound(t *testing.T) {
	e := newEnv(t, func(c *server.Config) { c.EgressMaxBody = 1000 })
	bearer := http.Header{"Authorization": {"Bearer " + e.token}}
	resp, body := e.do(t, http.MethodPost, "/egress/ECHO/x?do=upload", bearer, bytes.NewReader(make([]byte, 1001)))
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("POST 1001 bytes = %d %s, want 413", resp.StatusCode, body)
	}
	// A body of unknown length is cut off at the bound while streaming.
	resp, body = e.do(t, http.MethodPost, "/egress/ECHO/x?do=upload", bearer, io.MultiReader(bytes.NewReader(make([]byte, 5000))))
	if resp.StatusCode != http.StatusRequestEntityTooLarge && resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST 5000 streamed bytes = %d %s, want 413 (or the host's 400 for a cut body)", resp.StatusCode, body)
	}
	resp, body = e.do(t, http.MethodPost, "/egress/ECHO/x?do=upload", bearer, bytes.NewReader(make([]byte, 1000)))
	if resp.StatusCode != http.StatusOK || string(body) != `{"received":1000}` {
		t.Errorf("POST 1000 bytes = %d %s, want 200 received 1000", resp.StatusCode, body)
	}
}

// TestEgress_ErrorsDoNotLogTheValue sends a request with the token in the
// query to a host that is down: the transport's error holds the URL, and
// so the value, which must not reach the logs (newEnv's cleanup checks).
func TestEgress_ErrorsDoNotLogTheValue(t *testing.T) {
	e := newEnv(t, nil)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	e.br.SetSecret("shop", "DOWN", downURL, e.value)
	e.br.Report(e.token, brokertest.Entry(protocol.Egress, secretName, "DOWN"))
	resp, body := e.do(t, http.MethodGet, "/egress/DOWN/x?key="+e.token, nil, nil)
	if resp.StatusCode != http.StatusBadGateway || strings.Contains(string(body), e.value) {
		t.Errorf("GET to a host that is down = %d %s, want 502 without the value", resp.StatusCode, body)
	}
	if !strings.Contains(e.logs.String(), "egress: request failed") {
		t.Errorf("the failure was not logged")
	}
}
