package egress_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// declare saves each secret for the box at host, with value, and reports
// a declaration listing them beside ECHO.
func (e *env) declare(t *testing.T, host, value string, names ...string) {
	t.Helper()
	for _, n := range names {
		e.br.SetSecret("shop", n, host, value)
	}
	e.br.Report(e.token, brokertest.Entry(protocol.Egress, append([]string{secretName}, names...)...))
}

// rawChunks sends a GET for target to the broker on a connection of its
// own and returns the answer's status and its body's chunks as they were
// framed, calling between(first) after the first chunk arrives and
// before reading on.
func rawChunks(t *testing.T, brokerURL, target, header string, between func(first []byte)) (int, [][]byte) {
	t.Helper()
	addr := strings.TrimPrefix(brokerURL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", target, addr, header)
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	status, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	code, _ := strconv.Atoi(strings.Fields(status)[1])
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("GET %s: header: %v", target, err)
	}
	if code != http.StatusOK || h.Get("Transfer-Encoding") != "chunked" {
		return code, nil
	}
	var chunks [][]byte
	for i := 0; i < 1000; i++ {
		line, err := tp.ReadLine()
		if err != nil {
			t.Fatalf("GET %s: chunk: %v", target, err)
		}
		n, err := strconv.ParseInt(line, 16, 64)
		if err != nil {
			t.Fatalf("GET %s: chunk size %q", target, line)
		}
		if n == 0 {
			return code, chunks
		}
		c := make([]byte, n+2)
		if _, err := io.ReadFull(br, c); err != nil {
			t.Fatalf("GET %s: chunk: %v", target, err)
		}
		chunks = append(chunks, c[:n])
		if len(chunks) == 1 && between != nil {
			between(c[:n])
		}
	}
	t.Fatalf("GET %s: endless answer", target)
	return 0, nil
}

// TestEgress_RedactorCutIsNoOracle is the attack on a redactor that holds
// back only a tail that could begin the value. The host reflects the
// box's query into a streamed answer, after a fixed padding, and waits
// for the box before it ends. The box guesses the value one character at
// a time: the guess whose answer is cut differently from the others is
// the right one. Every guess must be cut alike, so none is told apart.
func TestEgress_RedactorCutIsNoOracle(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{}, 1)
	pad := strings.Repeat(".", 1000)
	reflect := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, pad+"Z"+r.URL.Query().Get("q"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "|end")
	})
	e.declare(t, reflect.URL, e.value, "REFLECT")
	auth := "Authorization: Bearer " + e.token + "\r\n"

	const known = "sk_live_" // the shape of the key, which the box may know
	const hex = "0123456789abcdef"
	guess := known
	for pos := 0; pos < 6; pos++ {
		firsts := map[byte]int{}
		for i := 0; i < len(hex); i++ {
			q := guess + string(hex[i])
			status, chunks := rawChunks(t, e.br.URL, "/egress/REFLECT/x?q="+url.QueryEscape(q), auth, func([]byte) {
				release <- struct{}{}
			})
			if status != http.StatusOK || len(chunks) == 0 {
				t.Fatalf("GET ?q=%s = %d with %d chunks, want 200 chunked", q, status, len(chunks))
			}
			if got, want := string(bytes.Join(chunks, nil)), pad+"Z"+q+"|end"; got != want {
				t.Fatalf("GET ?q=%s = %q, want %q", q, got, want)
			}
			firsts[hex[i]] = len(chunks[0])
		}
		// The odd one out, if there is exactly one.
		count := map[int]int{}
		for _, n := range firsts {
			count[n]++
		}
		odd := byte(0)
		for c, n := range firsts {
			if count[n] == 1 && len(count) == 2 {
				odd = c
			}
		}
		if odd == 0 {
			t.Logf("position %d: every guess was cut alike (%v); the value is not told", pos, count)
			break
		}
		guess += string(odd)
	}
	// A guess told apart by chance (a host's write the broker happened to
	// read in two) is right one time in 16; two right in a row is the
	// attack working.
	if len(guess) >= len(known)+2 && strings.HasPrefix(e.value, guess) {
		t.Errorf("the box recovered %q of the value %q from where its answers were cut", guess[len(known):], e.value)
	}
}

// pyQuote is Python's urllib.parse.quote(s, safe): every byte but
// letters, digits, "_.-~" and safe percent-escaped, in upper case.
func pyQuote(s, safe string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-~"+safe, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsonAll writes every byte of s as a JSON \u escape.
func jsonAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

// valueForms are the forms of v the broker makes or a host commonly
// re-encodes it in, none of which may reach the box.
func valueForms(v, user string) map[string]string {
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + v))
	jsonSlash, _ := json.Marshal(v)
	return map[string]string{
		"raw":                   v,
		"query-escaped":         url.QueryEscape(v),
		"path-escaped":          url.PathEscape(v),
		"python quote":          pyQuote(v, "/"),
		"python quote safe=''":  pyQuote(v, ""),
		"lower-case escapes":    strings.ToLower(pyQuote(v, "")),
		"json":                  strings.ReplaceAll(string(jsonSlash[1:len(jsonSlash)-1]), "/", `\/`),
		"json \\u":              jsonAll(v),
		"basic":                 basic,
		"basic unpadded":        strings.TrimRight(basic, "="),
		"basic in json":         strings.ReplaceAll(basic, "/", `\/`),
		"basic query-escaped":   url.QueryEscape(basic),
		"raw in a query-escape": url.QueryEscape("Basic " + basic),
	}
}

// TestEgress_BasicFormOfValueIsCaught is the attack on an answer
// searched only for the value as it is: the box sends its token as Basic
// credentials (curl -u user:TOKEN), the broker encodes base64("user:VALUE")
// and a host echoes it, or the value in another encoding, in its 103, its
// headers, its body and its trailers. None of those forms may come back.
func TestEgress_BasicFormOfValueIsCaught(t *testing.T) {
	e := newEnv(t, nil)
	value := "sk/live+" + randomHex(16) + "=="
	const user = "api"
	mirror := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		_, pass, _ := r.BasicAuth()
		forms := valueForms(pass, user)
		w.Header().Set("Link", "</a?k="+forms["python quote"]+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		var names []string
		for k := range forms {
			names = append(names, k)
		}
		w.Header().Set("Trailer", "X-Forms")
		w.Header().Set("X-Authorization", r.Header.Get("Authorization"))
		w.Header().Set("X-Basic", forms["basic"])
		w.Header().Set("X-Quoted", forms["python quote"])
		w.Header().Set("Content-Type", "application/json")
		for i, k := range names {
			_, _ = fmt.Fprintf(w, "%q: \"%s\",\n", k, forms[k])
			if i%3 == 0 {
				w.(http.Flusher).Flush()
			}
		}
		w.Header().Set("X-Forms", forms["basic"]+" "+forms["json \\u"]+" "+forms["lower-case escapes"])
	})
	e.declare(t, mirror.URL, value, "MIRROR")

	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, fmt.Sprint(h))
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, e.br.URL+"/egress/MIRROR/x", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.SetBasicAuth(user, e.token)
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d %v %s, want 200", resp.StatusCode, err, body)
	}
	if len(hints) != 1 {
		t.Errorf("the box received %d 103 answers, want 1", len(hints))
	}
	seen := strings.Join(hints, "\n") + "\n" + fmt.Sprint(resp.Header) + "\n" + string(body) + "\n" + fmt.Sprint(resp.Trailer)
	leaked := false
	for name, form := range valueForms(value, user) {
		if strings.Contains(seen, form) {
			t.Errorf("the answer carries the value's %s form %q", name, form)
			leaked = true
		}
	}
	if leaked {
		t.Logf("the answer:\n%s", seen)
	}
	if g, w := resp.Header.Get("X-Authorization"), req.Header.Get("Authorization"); g != w {
		t.Errorf("X-Authorization = %q, want what the box sent, %q", g, w)
	}
}

// TestEgress_ContentEncodingIsJudgedWhole is the attack on a broker that
// reads only the first Content-Encoding header: a host answers gzip
// under a first header of identity (or an empty one), and the gzip body,
// holding the value, would go to the box unread. Every answer whose
// encoding is not one the broker reads whole is a 502 that says why.
func TestEgress_ContentEncodingIsJudgedWhole(t *testing.T) {
	e := newEnv(t, nil)
	zipped := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = io.WriteString(zw, s)
		_ = zw.Close()
		return b.Bytes()
	}
	host := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		encs := r.URL.Query()["enc"]
		if len(encs) == 1 && encs[0] == "none" {
			encs = nil
		}
		w.Header()["Content-Encoding"] = encs
		body := zipped("the key " + auth)
		if strings.Count(strings.Join(encs, ","), "gzip") == 2 {
			body = zipped(string(body))
		}
		_, _ = w.Write(body)
	})
	e.declare(t, host.URL, e.value, "ZIP")
	// The box asks for what the broker cannot read; the broker asks for gzip.
	bearer := http.Header{"Authorization": {"Bearer " + e.token}, "Accept-Encoding": {"br, zstd"}}
	tests := []struct {
		name   string
		query  string
		status int
		says   string
	}{
		{"identity then gzip", "enc=identity&enc=gzip", 502, "2 Content-Encoding headers"},
		{"empty then gzip", "enc=&enc=gzip", 502, "2 Content-Encoding headers"},
		{"gzip twice", "enc=gzip&enc=gzip", 502, "2 Content-Encoding headers"},
		{"stacked", "enc=gzip,+gzip", 502, "stacked content encodings (gzip, gzip)"},
		{"stacked with identity", "enc=identity,+gzip,+br", 502, "stacked content encodings (gzip, br)"},
		{"brotli", "enc=br", 502, "content encoding (br)"},
		{"gzip alone is read", "enc=gzip", 200, ""},
		{"gzip with identity is read", "enc=identity,+gzip", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(host.Seen())
			resp, body := e.do(t, http.MethodGet, "/egress/ZIP/x?"+tt.query, bearer, nil)
			if got := host.Seen()[before:]; len(got) != 1 || got[0].Header.Get("Accept-Encoding") != "gzip" {
				t.Errorf("the host received %+v, want one request with Accept-Encoding gzip", got)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("answer = %d %q, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.status == 200 {
				if resp.Header.Get("Content-Encoding") != "" || string(body) != "the key Bearer "+e.token {
					t.Errorf("answer = %q (Content-Encoding %q), want the decoded body with the token in the value's place", body, resp.Header.Get("Content-Encoding"))
				}
				return
			}
			if _, msg := brokertest.Refusal(body); !strings.Contains(msg, tt.says) {
				t.Errorf("refusal = %q, want it to say %q", msg, tt.says)
			}
		})
	}
}

// bodyHost records the bodies a host received.
type bodyHost struct {
	*host
	mu     sync.Mutex // guards bodies
	bodies []string
}

func newBodyHost(t *testing.T) *bodyHost {
	bh := &bodyHost{}
	bh.host = newHost(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bh.mu.Lock()
		bh.bodies = append(bh.bodies, string(b))
		bh.mu.Unlock()
		fmt.Fprintf(w, "received %d bytes, length %d", len(b), r.ContentLength)
	})
	return bh
}

// unescape decodes %hh, \u00hh and \/ as a form or JSON reader would.
func unescape(s string) string {
	s = strings.ReplaceAll(s, `\/`, "/")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		if s[i] == '\\' && i+5 < len(s) && s[i+1] == 'u' {
			if n, err := strconv.ParseUint(s[i+2:i+6], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 5
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestEgress_TokenInAnUnnamedBodyFieldAloneIsRefused: a token in the
// body alone, in a field the secret does not name, would be marked, so
// the host would receive no credential: the box is refused (401) and
// the host receives nothing.
func TestEgress_TokenInAnUnnamedBodyFieldAloneIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	bh := newBodyHost(t)
	e.declare(t, bh.URL, e.value, "BODY")
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	resp, got := e.do(t, http.MethodPost, "/egress/BODY/v1/charges", h, strings.NewReader("amount=1&key="+e.token))
	if _, msg := brokertest.Refusal(got); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(msg, "--body-field") {
		t.Errorf("POST with the token in its body alone = %d %s, want 401 naming --body-field", resp.StatusCode, got)
	}
	if n := len(bh.Seen()); n != 0 {
		t.Errorf("the host received %d requests, want none", n)
	}
}

// TestEgress_LongBodyKeepsItsLength checks that a body over the bound
// read whole, with no token in it, reaches the host with the length the
// box declared, as an upload to object storage needs.
func TestEgress_LongBodyKeepsItsLength(t *testing.T) {
	e := newEnv(t, nil)
	bh := newBodyHost(t)
	e.declare(t, bh.URL, e.value, "BODY")
	body := strings.Repeat("y", 3<<20)
	h := http.Header{"Authorization": {"Bearer " + e.token}, "Content-Type": {"application/octet-stream"}}
	resp, got := e.do(t, http.MethodPut, "/egress/BODY/bucket/object", h, strings.NewReader(body))
	if want := fmt.Sprintf("received %d bytes, length %d", len(body), len(body)); resp.StatusCode != http.StatusOK || string(got) != want {
		t.Errorf("PUT = %d %q, want 200 %q", resp.StatusCode, got, want)
	}
}

// TestEgress_PathSegmentsServersReadAsDots is the attack on a path check
// that knows only "." and "..": Tomcat and Jetty read "..;" as "..",
// others decode twice or stop at a NUL, so the path prefix could be
// climbed out of. Each is refused, and the host never reached.
func TestEgress_PathSegmentsServersReadAsDots(t *testing.T) {
	e := newEnv(t, nil)
	auth := "Authorization: Bearer " + e.token + "\r\n"
	for _, target := range []string{
		"/egress/ECHO/..;/x",
		"/egress/ECHO/..;jsessionid=1/x",
		"/egress/ECHO/%2e%2e;/x",
		"/egress/ECHO/..%3B/x",
		"/egress/ECHO/..%00/x",
		"/egress/ECHO/a%00b",
		"/egress/ECHO/.%252e/x",
		"/egress/ECHO/%252e%252e/x",
		"/egress/ECHO/%25252e%25252e/x",
		"/egress/ECHO/..%252f..%252fx",
		"/egress/ECHO/.;/x",
		"/egress/ECHO/..%20/x",
		"/egress/ECHO/%c0%ae%c0%ae/x",
		"/egress/ECHO/%ef%bc%8e%ef%bc%8e/x",
	} {
		before := len(e.echo.Seen())
		status, body := rawRequest(t, e.br.URL, target, auth)
		if status != http.StatusBadRequest {
			t.Errorf("GET %s = %d %s, want 400", target, status, body)
		}
		if n := len(e.echo.Seen()) - before; n != 0 {
			t.Errorf("GET %s reached the host %d times", target, n)
		}
	}
	// Neighbours that are no dot segment still go through.
	for _, target := range []string{"/egress/ECHO/a;b=c", "/egress/ECHO/...", "/egress/ECHO/.well-known/x", "/egress/ECHO/a..b"} {
		if status, body := rawRequest(t, e.br.URL, target, auth); status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", target, status, body)
		}
	}
}

// TestEgress_LinksPointBackAtTheBroker is the attack of a redirect at the
// secret's host: a client that follows an absolute Location goes around
// the broker, and sends what it sent the broker (the token, in the query)
// to the host itself. Location, Content-Location and Link under the
// secret's base come back as /egress/NAME/..., and a client following
// them reaches the host only through the broker (newEnv's cleanup fails
// the test if a host receives the token).
func TestEgress_LinksPointBackAtTheBroker(t *testing.T) {
	e := newEnv(t, nil)
	var links *host
	links = newHost(t, func(w http.ResponseWriter, r *http.Request) {
		abs := links.URL + "/base"
		switch r.URL.Path {
		case "/base/start":
			w.Header().Set("Link", "<"+abs+"/hint>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Link", "<"+abs+"/page?"+r.URL.RawQuery+"&n=2>; rel=\"next\", <"+e.other.URL+"/elsewhere>; rel=\"other\", <"+links.URL+"/outside>; rel=\"up\"")
			w.Header().Set("Content-Location", abs+"/start")
			http.Redirect(w, r, abs+"/next?"+r.URL.RawQuery, http.StatusFound)
		case "/base/next":
			fmt.Fprintf(w, "followed %s", r.URL.Query().Get("key"))
		default:
			http.NotFound(w, r)
		}
	})
	e.declare(t, links.URL+"/base", e.value, "LINKS")

	var hints []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, h.Get("Link"))
		return nil
	}}
	req, _ := http.NewRequest(http.MethodGet, e.br.URL+"/egress/LINKS/start?key="+e.token, nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if g, w := resp.Header.Get("Location"), "/egress/LINKS/next?key="+e.token; g != w {
		t.Errorf("Location = %q, want %q", g, w)
	}
	if g, w := resp.Header.Get("Content-Location"), "/egress/LINKS/start"; g != w {
		t.Errorf("Content-Location = %q, want %q", g, w)
	}
	wantLink := "</egress/LINKS/page?key=" + e.token + "&n=2>; rel=\"next\", <" + e.other.URL + "/elsewhere>; rel=\"other\", <" + links.URL + "/outside>; rel=\"up\""
	if g := resp.Header.Get("Link"); g != wantLink {
		t.Errorf("Link = %q, want %q", g, wantLink)
	}
	if len(hints) != 1 || hints[0] != "</egress/LINKS/hint>; rel=preload" {
		t.Errorf("103 Link = %q, want </egress/LINKS/hint>", hints)
	}

	// A client that follows redirects, as fetch does, comes back through
	// the broker.
	resp, err = http.Get(e.br.URL + "/egress/LINKS/start?key=" + e.token)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "followed "+e.token {
		t.Errorf("followed = %d %q, want 200 followed <token>", resp.StatusCode, body)
	}
}

// TestEgress_GitGetsABasicChallenge is the attack of git's own protocol
// on a broker that refuses a request with no token as the inference
// routes do: git sends the credentials in its URL only after a 401 that
// asks for Basic. On egress, no token is a 401 with WWW-Authenticate:
// Basic, and git's second request, with x:TOKEN, goes through. The
// inference routes keep their 403.
func TestEgress_GitGetsABasicChallenge(t *testing.T) {
	e := newEnv(t, nil)
	git := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != e.value {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "# service=git-upload-pack\n")
	})
	e.declare(t, git.URL, e.value, "GIT")

	// git's way: no credentials, then the URL's on a 401 asking for Basic.
	path := "/egress/GIT/owner/repo.git/info/refs?service=git-upload-pack"
	resp, body := e.do(t, http.MethodGet, path, nil, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET with no token = %d %s, want 401", resp.StatusCode, body)
	}
	if g, w := resp.Header.Get("WWW-Authenticate"), `Basic realm="boxbroker egress GIT"`; g != w {
		t.Errorf("WWW-Authenticate = %q, want %q", g, w)
	}
	_, msg := brokertest.Refusal(body)
	for _, place := range []string{"Bearer", "Basic", "x-api-key", "query"} {
		if !strings.Contains(msg, place) {
			t.Errorf("refusal %q does not name %s", msg, place)
		}
	}
	h := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+e.token))}}
	if resp, body := e.do(t, http.MethodGet, path, h, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET with x:TOKEN = %d %s, want 200", resp.StatusCode, body)
	}

	// An unknown token is still a 403, and so is no token on inference.
	bad := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("x:bbx_"+strings.Repeat("A", 43)))}}
	if resp, body := e.do(t, http.MethodGet, path, bad, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET with an unknown token = %d %s, want 403", resp.StatusCode, body)
	}
	resp, body = e.do(t, http.MethodPost, "/llm/anthropic/v1/messages", nil, strings.NewReader("{}"))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("inference with no token = %d %s (WWW-Authenticate %q), want 403 without a challenge", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestEgress_GitClone runs git itself against git's own smart HTTP server
// (git http-backend, as CGI) behind a secret: git clone with the box's
// token as the URL's password must clone, through the 401 challenge.
func TestEgress_GitClone(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	execPath, err := exec.Command(gitPath, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skip("git-http-backend is not installed")
	}
	dir := t.TempDir()
	env := append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitPath, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	root := filepath.Join(dir, "srv")
	work := filepath.Join(dir, "work")
	git("init", "-q", "--bare", filepath.Join(root, "owner", "repo.git"))
	git("init", "-q", work)
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("cloned through the broker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("-C", work, "add", "README")
	git("-C", work, "commit", "-q", "-m", "first")
	git("-C", work, "push", "-q", filepath.Join(root, "owner", "repo.git"), "HEAD:refs/heads/main")
	git("--git-dir", filepath.Join(root, "owner", "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main")

	e := newEnv(t, nil)
	cgiHandler := &cgi.Handler{Path: backend, Root: "/", Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	host := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		if _, pass, ok := r.BasicAuth(); !ok || pass != e.value {
			w.Header().Set("WWW-Authenticate", `Basic realm="host"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	})
	e.declare(t, host.URL, e.value, "GIT")

	u, _ := url.Parse(e.br.URL + "/egress/GIT/owner/repo.git")
	u.User = url.UserPassword("x", e.token)
	clone := filepath.Join(dir, "clone")
	git("clone", "-q", u.String(), clone)
	b, err := os.ReadFile(filepath.Join(clone, "README"))
	if err != nil || string(b) != "cloned through the broker\n" {
		t.Errorf("the clone's README = %q, %v, want the committed one", b, err)
	}
}

// TestEgress_GrantNeverReachesTheHost is the attack on a broker that
// keeps only the box's own token from a secret's host: a box puts a grant
// (or an admin token) it holds in a custom header, the query or the body,
// plainly or escaped, and it would reach the host as sent. The host must
// receive none of them, in any encoding, while the box's token is still
// swapped for the value.
func TestEgress_GrantNeverReachesTheHost(t *testing.T) {
	e := newEnv(t, nil)
	bh := newBodyHost(t)
	e.declare(t, bh.URL, e.value, "BODY")
	grant := "bbg_" + strings.Repeat("Gx7-", 10) + "abc"
	admin := "bba_" + strings.Repeat("Ad9_", 10) + "xyz"
	escaped := strings.Replace(grant, "_", `\u005f`, 1)
	tests := []struct {
		name, ctype, body string
		stream            bool
	}{
		{"json", "application/json", `{"grant":"` + escaped + `","admin":"` + admin + `"}`, false},
		{"form, streamed", "application/x-www-form-urlencoded", "g=%62bg" + grant[3:] + "&a=" + admin, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {tt.ctype}, "Authorization": {"Bearer " + e.token},
				"X-Visitor-Grant": {grant}, "Referer": {"https://app.example/?g=" + url.QueryEscape(admin)}}
			var body io.Reader = strings.NewReader(tt.body)
			if tt.stream {
				body = io.MultiReader(body)
			}
			before := len(bh.Seen())
			resp, got := e.do(t, http.MethodPost, "/egress/BODY/v1/x?grant="+grant+"&key="+e.token, h, body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST = %d %s, want 200", resp.StatusCode, got)
			}
			seen := bh.Seen()[before:]
			bh.mu.Lock()
			bodies := bh.bodies[before:]
			bh.mu.Unlock()
			if len(seen) != 1 || len(bodies) != 1 {
				t.Fatalf("the host received %d requests, want 1", len(seen))
			}
			sent := seen[0].dump() + "\n" + bodies[0]
			for _, v := range []string{grant, admin, e.token} {
				if strings.Contains(sent, v) || strings.Contains(unescape(sent), v) {
					t.Errorf("the host received %.8s…: %s", v, sent)
				}
			}
			if !strings.Contains(seen[0].RawQuery, "key="+url.QueryEscape(e.value)) {
				t.Errorf("the host received the query %s, want the value in the token's place", seen[0].RawQuery)
			}
		})
	}
}
