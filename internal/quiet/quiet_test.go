package quiet_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/token"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

const key = "sk-ant-api03-QUIET0123456789abcdef"

// TestErrors_MalformedAnswerNeverQuotesWhatWasSent: a peer that answers
// with what it was sent as its status line makes Go's transport quote it
// in its error; through Errors the error's text holds none of it, in a
// header, Basic credentials or the query.
func TestErrors_MalformedAnswerNeverQuotesWhatWasSent(t *testing.T) {
	addr := upstreamtest.EchoStatus(t)
	tests := []struct {
		name   string
		header http.Header
		query  string
		values []string
	}{
		{"x-api-key", http.Header{"X-Api-Key": {key}}, "", []string{key}},
		{"bearer", http.Header{"Authorization": {"Bearer " + key}}, "", []string{key}},
		{"basic", http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+key))}}, "",
			[]string{key, base64.StdEncoding.EncodeToString([]byte("operator:" + key))}},
		{"query", nil, "key=" + url.QueryEscape(key+"/+"), []string{key, url.QueryEscape(key + "/+")}},
		{"quoted", http.Header{"X-Api-Key": {key + `"\`}}, "", []string{key}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			do := func(rt http.RoundTripper) error {
				req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/models?"+tt.query, nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header = tt.header.Clone()
				if req.Header == nil {
					req.Header = http.Header{}
				}
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
					t.Fatal("the malformed answer was read")
				}
				return err
			}
			raw := http.DefaultTransport.(*http.Transport).Clone()
			t.Cleanup(raw.CloseIdleConnections)
			if bare := do(raw); !strings.Contains(bare.Error(), tt.values[len(tt.values)-1]) {
				t.Fatalf("the bare transport's error does not quote what was sent, so this test shows nothing: %v", bare)
			}
			err := do(quiet.Errors(raw))
			for _, v := range tt.values {
				if strings.Contains(err.Error(), v) {
					t.Errorf("the error quotes %q: %v", v, err)
				}
			}
			if !strings.Contains(err.Error(), quiet.Marker) {
				t.Errorf("the error does not say a value was there: %v", err)
			}
		})
	}
}

type timeoutErr struct{ text string }

func (e timeoutErr) Error() string   { return e.text }
func (e timeoutErr) Timeout() bool   { return true }
func (e timeoutErr) Temporary() bool { return false }

// TestErr_KeepsWhatItWraps: an error Err rewrites is still what it was to
// errors.Is, errors.As and a url.Error's Timeout, and one that holds
// nothing sent is returned as it is.
func TestErr_KeepsWhatItWraps(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/x", nil)
	req.Header.Set("X-Api-Key", key)
	inner := timeoutErr{text: "read " + key + ": i/o timeout"}
	err := quiet.Err(errors.Join(inner, os.ErrDeadlineExceeded), req)
	if strings.Contains(err.Error(), key) {
		t.Fatalf("Err kept the key: %v", err)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("errors.Is no longer finds what the error wrapped")
	}
	var te timeoutErr
	if !errors.As(err, &te) {
		t.Error("errors.As no longer finds what the error wrapped")
	}
	if !(&url.Error{Op: "Get", URL: "https://api.example/x", Err: err}).Timeout() {
		t.Error("a url.Error around it no longer reports a timeout")
	}
	plain := context.Canceled
	if got := quiet.Err(plain, req); got != plain {
		t.Errorf("Err(%v) = %v, want it as it was", plain, got)
	}
	if rt := quiet.Errors(nil); quiet.Errors(rt) != rt {
		t.Error("Errors wrapped its own RoundTripper again")
	}
}

// TestErrors_MalformedTrailerNeverQuotesWhatWasSent: a peer that ends a
// chunked answer with a trailer line repeating what it was sent makes the
// body's last read fail with an error that quotes it; through Errors
// that error holds none of it, and the body read before it is whole.
func TestErrors_MalformedTrailerNeverQuotesWhatWasSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n%s\r\n\r\n", r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(srv.Close)
	raw := srv.Client().Transport
	read := func(rt http.RoundTripper) (string, error) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Api-Key", key)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if _, err := read(raw); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("the bare transport's read error does not quote the key, so this test shows nothing: %v", err)
	}
	got, err := read(quiet.Errors(raw))
	if got != "hello" {
		t.Errorf("read %q before the error, want hello", got)
	}
	if err == nil || strings.Contains(err.Error(), key) {
		t.Errorf("the read error = %v, want one that does not quote the key", err)
	}
}

// TestShown_QuotesNamesAndPathsNeverAKey: a name or a path is quoted; a
// key, a token or a PEM block given where one goes is said only by its
// length.
func TestShown_QuotesNamesAndPathsNeverAKey(t *testing.T) {
	for _, s := range []string{"alpha", "Alpha_Box", "github-token", "STRIPE_KEY", "my box", "/etc/boxbroker/tls.crt",
		"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "C:\\certs\\tls.pem", "café", "/tmp/tmp.AbCdEf1234/cert.pem", "heyJude", "task-ant-3",
		"/tmp/TestServe_MalformedEnvValueRefused1234567890/002/missing.crt"} {
		if got := quiet.Shown(s, 1024); got != strconv.Quote(s) {
			t.Errorf("Shown(%q) = %s, want it quoted", s, got)
		}
	}
	for _, s := range []string{
		"sk-ant-api03-Xkey1AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"ghp_Xkey2abcdefghijklmnopqrstuvwxyz0123",
		"xoxb-1234-5678-Xkey3",
		"AKIAXKEY4EXAMPLE0000",
		"eyJhbGciOiJIUzI1NiJ9.Xkey5.sig",
		"-----BEGIN CERTIFICATE-----\nXkey6\n-----END CERTIFICATE-----\n",
		"a\nXkey7",
		"Xkey8aB3dE5gH7jK9mN1pQ3s",
		"000102030405060708090a0b0c0d0e0fXkey9",
		"bbx_Xkey10abcdefghijklmnopqrstuvwxyz01234567",
		"wJalrXUtnFEMI/K7MDENG/bPxRfiXkey13",
		"/path/\x1b]52;c;Xkey11\x07",
		strings.Repeat("Xkey12", 200),
	} {
		got := quiet.Shown(s, 1024)
		if strings.Contains(got, "Xkey") || !strings.Contains(got, "not shown") || !strings.Contains(got, strconv.Itoa(len(s))+" bytes") {
			t.Errorf("Shown(%q) = %s, want only its length", s, got)
		}
	}
	for _, p := range []string{token.BoxPrefix, token.AdminPrefix, token.GrantPrefix} {
		if !quiet.Credential(p + "abc") {
			t.Errorf("Credential(%q) = false, want boxbroker's own token found", p+"abc")
		}
	}
	if got := quiet.Shown("alpha", 4); strings.Contains(got, "alpha") {
		t.Errorf("Shown past its bound = %s, want only its length", got)
	}
}

// TestErr_TakesOutAFormBodysValues: a form body the request can give
// again (an OAuth token request's, with its client secret and refresh
// token) is read for its values, which an error quoting the form as the
// peer repeated it holds percent-escaped; a body of another type is not.
func TestErr_TakesOutAFormBodysValues(t *testing.T) {
	secret := key + "/+="
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {secret}}.Encode()
	for _, tt := range []struct {
		contentType string
		kept        bool
	}{
		{"application/x-www-form-urlencoded", false},
		{"application/x-www-form-urlencoded; charset=utf-8", false},
		{"text/plain", true},
	} {
		req, err := http.NewRequest(http.MethodPost, "https://auth.example/token", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tt.contentType)
		got := quiet.Err(fmt.Errorf("malformed HTTP status code %q", form), req).Error()
		if kept := strings.Contains(got, url.QueryEscape(secret)); kept != tt.kept {
			t.Errorf("%s: the error holds the value percent-escaped: %v, want %v (%s)", tt.contentType, kept, tt.kept, got)
		}
	}
}
