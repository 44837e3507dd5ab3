package egress_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// punctuated is a value holding every byte an HTML, JSON or URL escaper
// writes otherwise, as passwords and some API keys do.
func punctuated() string { return `pa"ss&w<o>r'd/+\=` + randomHex(12) }

// escapedForms are the ways an HTML, XML, JSON or form encoder writes v.
func escapedForms(v string) map[string]string {
	js, _ := json.Marshal(v)
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	plainJSON := strings.TrimSpace(raw.String())
	refs := func(format string) string {
		var b strings.Builder
		for _, c := range []byte(v) {
			if strings.IndexByte(`"&<>'/+\=`, c) >= 0 {
				fmt.Fprintf(&b, format, c)
			} else {
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	return map[string]string{
		"html.EscapeString":       html.EscapeString(v),
		"html/template":           template.HTMLEscapeString(v),
		"python html.escape":      strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;").Replace(v),
		"php htmlspecialchars":    strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#039;").Replace(v),
		"xml":                     strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(v),
		"hex references":          refs("&#x%x;"),
		"upper-case hex refs":     refs("&#X%X;"),
		"decimal references":      refs("&#%d;"),
		"json":                    string(js[1 : len(js)-1]),
		"json, no html escaping":  plainJSON[1 : len(plainJSON)-1],
		"json with \\/":           strings.ReplaceAll(plainJSON[1:len(plainJSON)-1], "/", `\/`),
		"form":                    url.QueryEscape(v),
		"form, lower-case hex":    strings.ToLower(url.QueryEscape(v)),
		"path":                    url.PathEscape(v),
		"go quoted":               strconv.Quote(v)[1 : len(strconv.Quote(v))-1],
		"html-escaped form value": html.EscapeString("?k=" + v),
	}
}

// decodedLeaks reports which decoding of s, or of any line of it, holds
// v: as it is, HTML-unescaped, JSON- or Go-unquoted, URL-unescaped.
func decodedLeaks(s, v string) []string {
	var out []string
	for _, line := range append(strings.Split(s, "\n"), s) {
		line = strings.TrimSpace(line)
		ds := map[string]string{"raw": line, "html": html.UnescapeString(line)}
		var j string
		if json.Unmarshal([]byte(`"`+line+`"`), &j) == nil {
			ds["json"] = j
		}
		if q, err := strconv.Unquote(line); err == nil {
			ds["go"] = q
		}
		if q, err := url.QueryUnescape(line); err == nil {
			ds["form"] = q
		}
		for name, d := range ds {
			if strings.Contains(d, v) {
				out = append(out, fmt.Sprintf("%s of %q", name, line))
			}
		}
	}
	return out
}

// formLeaks reports which of v's escaped forms s holds.
func formLeaks(s, v string) []string {
	var out []string
	for name, f := range escapedForms(v) {
		if strings.Contains(s, f) {
			out = append(out, name)
		}
	}
	return out
}

// logStrings is every string of the log's JSON lines, one a line.
func logStrings(t *testing.T, log string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line is no JSON: %v: %s", err, line)
		}
		for _, v := range m {
			if s, ok := v.(string); ok {
				b.WriteString(s + "\n")
			}
		}
	}
	return b.String()
}

// TestEgress_HTMLOrJSONEscapedValueNeverReachesTheBox is the attack on
// an answer search that reads a value's bytes percent- or \u00hh-escaped
// alone: a host that received the value (a password holding & < > " '
// / + \) repeats it in an HTML page or a JSON document, as its escaper
// writes it (&amp;, &quot;, &#39;, &#x27;, &#039;, \", \\), in the
// body (each form split across writes), a header and a trailer. The box
// must find the value in none of them, by any decoding.
func TestEgress_HTMLOrJSONEscapedValueNeverReachesTheBox(t *testing.T) {
	e := newEnv(t, nil)
	value := punctuated()
	mirror := newHost(t, func(w http.ResponseWriter, r *http.Request) {
		v := sentValue(r)
		fs := escapedForms(v)
		w.Header().Set("Trailer", "X-Escaped")
		w.Header().Set("X-Escaped-Html", fs["html.EscapeString"])
		w.Header().Set("X-Escaped-Json", fs["json"])
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		for _, f := range fs {
			half := len(f) / 2
			_, _ = fmt.Fprintf(w, "%s", f[:half])
			w.(http.Flusher).Flush()
			_, _ = fmt.Fprintf(w, "%s\n", f[half:])
		}
		w.Header().Set("X-Escaped", fs["python html.escape"])
	})
	e.br.SetSecret("shop", secretName, mirror.URL+"/base", value)
	resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d %s, want 200", resp.StatusCode, body)
	}
	if got := mirror.Seen(); len(got) != 1 || got[0].Header.Get("X-Api-Key") != value {
		t.Fatalf("the host received %d requests, want 1 carrying the value", len(got))
	}
	seen := map[string]string{"body": string(body)}
	for k, vs := range resp.Header {
		seen["header "+k] = strings.Join(vs, "\n")
	}
	for k, vs := range resp.Trailer {
		seen["trailer "+k] = strings.Join(vs, "\n")
	}
	for where, s := range seen {
		if l := append(decodedLeaks(s, value), formLeaks(s, value)...); len(l) > 0 {
			t.Errorf("the %s carries the value: %v", where, l)
		}
	}
	if !strings.Contains(string(body), e.token) {
		t.Errorf("the body holds no box's token in the value's place:\n%s", body)
	}
}

// TestEgress_QuotedValueInAMalformedAnswerIsNotLogged: a host answers a
// malformed status line repeating the value it received, one holding "
// and \, which Go's transport quotes in its error as \" and \\; the
// broker's log and the box's refusal hold it in no form.
func TestEgress_QuotedValueInAMalformedAnswerIsNotLogged(t *testing.T) {
	e := newEnv(t, nil)
	value := punctuated()
	e.br.SetSecret("shop", secretName, "http://"+upstreamtest.EchoStatus(t)+"/base", value)
	resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d %s, want 502", resp.StatusCode, body)
	}
	if s := fmt.Sprint(resp.Header) + "\n" + string(body); len(decodedLeaks(s, value)) > 0 || len(formLeaks(s, value)) > 0 {
		t.Errorf("the refusal carries the value: %v %v", decodedLeaks(s, value), formLeaks(s, value))
	}
	if l := formLeaks(logStrings(t, e.logs.String()), value); len(l) > 0 {
		t.Errorf("the log holds the value (%v):\n%s", l, e.logs.String())
	}
	if !strings.Contains(e.logs.String(), "malformed HTTP status code") {
		t.Errorf("the log tells nothing of the malformed answer:\n%s", e.logs.String())
	}
}

// TestEgress_HTMLEscapedTokenInAHeaderBecomesTheValue: the box's token
// in a header with a byte written as an HTML character reference
// (&#98;bx_…), beside its token where the key goes, is found as the
// answer search finds the value (one search reads both), and the value
// is written in its place as for a percent-escaped token: the host
// receives the box's token in no form.
func TestEgress_HTMLEscapedTokenInAHeaderBecomesTheValue(t *testing.T) {
	e := newEnv(t, nil)
	escaped := []string{"&#98;" + e.token[1:], "&#x62;" + e.token[1:], e.token[:3] + "&#95;" + e.token[4:]}
	resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}, "X-Other": escaped}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d %s, want 200", resp.StatusCode, body)
	}
	seen := e.echo.Seen()
	if len(seen) != 1 {
		t.Fatalf("the host received %d requests, want 1", len(seen))
	}
	for k, vs := range seen[0].Header {
		for _, v := range vs {
			if strings.Contains(html.UnescapeString(v), e.token) {
				t.Errorf("the host received the box's token in %s: %q", k, v)
			}
		}
	}
	if got := seen[0].Header.Values("X-Other"); len(got) != len(escaped) || got[0] != e.value {
		t.Errorf("X-Other = %q, want the value in each place of the token", got)
	}
}

// twiceForms are the ways encoders write v twice over, one layer
// escaping what another wrote, and, for a value past ASCII, the ways
// encoders that write only ASCII write it once.
func twiceForms(v string) map[string]string {
	inner := func(b []byte, _ error) string { return string(b[1 : len(b)-1]) }
	goJSON := func(s string) string { return inner(json.Marshal(s)) }
	ascii := func(format string, pair bool) string {
		var b strings.Builder
		for _, r := range v {
			switch {
			case r < 0x80:
				b.WriteRune(r)
			case pair && r > 0xffff:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, format+format, r1, r2)
			default:
				fmt.Fprintf(&b, format, r)
			}
		}
		return b.String()
	}
	python := ascii(`\u%04x`, true)
	return map[string]string{
		"json in json":              goJSON(goJSON(v)),
		"html in json":              goJSON(html.EscapeString(v)),
		"html escaped twice":        html.EscapeString(html.EscapeString(v)),
		"json in an html attribute": template.HTMLEscapeString(goJSON(v)),
		"url in a url":              url.QueryEscape(url.QueryEscape(v)),
		"json in a url":             url.QueryEscape(goJSON(v)),
		"python json":               python,
		"python json in json":       goJSON(python),
		"asp.net html":              ascii("&#x%X;", false),
		"xml as ascii":              ascii("&#%d;", false),
	}
}

// TestEgress_ValueEscapedTwiceOrPastASCIINeverReachesTheBox is the
// attack on an answer search that reads each byte through one escape,
// and a \u escape as one byte: a host that received the value repeats it
// as encoders write it twice over (JSON in a JSON string, an HTML page
// in JSON, HTML escaped again, JSON in an HTML attribute, a URL in a
// URL), and, for a value past ASCII, as Python's and PHP's JSON and
// ASP.NET's HTML write it, each split across writes. The box must find
// the value in none of them.
func TestEgress_ValueEscapedTwiceOrPastASCIINeverReachesTheBox(t *testing.T) {
	for _, value := range []string{punctuated(), "pässwörd-€𝄞\"&/" + randomHex(12)} {
		e := newEnv(t, nil)
		mirror := newHost(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			for name, f := range twiceForms(sentValue(r)) {
				half := len(f) / 2
				_, _ = fmt.Fprintf(w, "%s: %s", name, f[:half])
				w.(http.Flusher).Flush()
				_, _ = fmt.Fprintf(w, "%s\n", f[half:])
			}
		})
		e.br.SetSecret("shop", secretName, mirror.URL+"/base", value)
		resp, body := e.do(t, http.MethodGet, "/egress/ECHO/x", http.Header{"X-Api-Key": {e.token}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET = %d %s, want 200", resp.StatusCode, body)
		}
		if got := mirror.Seen(); len(got) != 1 || got[0].Header.Get("X-Api-Key") != value {
			t.Fatalf("the host received %d requests, want 1 carrying the value", len(got))
		}
		for name, f := range twiceForms(value) {
			if strings.Contains(string(body), f) {
				t.Errorf("the body carries the value as %s:\n%s", name, body)
			}
		}
		if n := strings.Count(string(body), e.token); n != len(twiceForms(value)) {
			t.Errorf("the body holds the box's token %d times, want one in each form's place:\n%s", n, body)
		}
	}
}
