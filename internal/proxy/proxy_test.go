package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/quiet"
)

func TestBufferPool_LendsSmallBuffers(t *testing.T) {
	var p bufferPool
	b := p.Get()
	if len(b) != CopyBufferSize {
		t.Fatalf("len(Get()) = %d, want %d", len(b), CopyBufferSize)
	}
	p.Put(b)
	p.Put(make([]byte, 10)) // too small to keep: ignored
	if got := p.Get(); len(got) != CopyBufferSize {
		t.Errorf("len(Get()) after Put = %d, want %d", len(got), CopyBufferSize)
	}
}

func TestNew_PoolsBuffers(t *testing.T) {
	rp := New(nil, http.DefaultTransport, nil)
	if rp.BufferPool == nil {
		t.Error("New: BufferPool = nil, want a pool (else every answer allocates 32 KiB)")
	}
}

func TestNewTransport_DoesNotAskForCompression(t *testing.T) {
	if tr := NewTransport(TransportOptions{}); !tr.DisableCompression {
		t.Error("NewTransport: DisableCompression = false, want true (the box's own Accept-Encoding goes upstream)")
	}
}

// TestNewTransport_Settings holds the outbound transport's tuning: an idle
// pool per host, HTTP/2 asked for, a bounded answer header, no proxy from
// the environment, TLS verified, and bounded dial, TLS and answer-header
// waits; and that options given replace the defaults.
func TestNewTransport_Settings(t *testing.T) {
	tr := NewTransport(TransportOptions{})
	if tr.MaxIdleConnsPerHost != 256 || tr.MaxIdleConns < tr.MaxIdleConnsPerHost {
		t.Errorf("idle pool: MaxIdleConnsPerHost %d, MaxIdleConns %d; want 256 per host, at least that in all", tr.MaxIdleConnsPerHost, tr.MaxIdleConns)
	}
	if !tr.ForceAttemptHTTP2 {
		t.Error("ForceAttemptHTTP2 = false: with a DialContext of its own the transport would never speak HTTP/2")
	}
	if tr.MaxResponseHeaderBytes != MaxResponseHeaderBytes || MaxResponseHeaderBytes != 64<<10 {
		t.Errorf("MaxResponseHeaderBytes = %d, want 64 KiB", tr.MaxResponseHeaderBytes)
	}
	if tr.Proxy != nil {
		t.Error("Proxy is set: outbound requests would follow HTTPS_PROXY from the environment")
	}
	if c := tr.TLSClientConfig; c != nil && c.InsecureSkipVerify {
		t.Error("TLS verification is off")
	}
	if tr.DialContext == nil || tr.TLSHandshakeTimeout <= 0 || tr.ResponseHeaderTimeout != 10*time.Minute {
		t.Errorf("waits: dialer set %v, TLS handshake %v, answer header %v; want a dialer, a bounded handshake, 10 minutes", tr.DialContext != nil, tr.TLSHandshakeTimeout, tr.ResponseHeaderTimeout)
	}
	tr = NewTransport(TransportOptions{ResponseHeaderTimeout: time.Second, MaxIdleConnsPerHost: 8, MaxResponseHeaderBytes: 1 << 10})
	if tr.ResponseHeaderTimeout != time.Second || tr.MaxIdleConnsPerHost != 8 || tr.MaxResponseHeaderBytes != 1<<10 {
		t.Errorf("options not applied: %v %d %d", tr.ResponseHeaderTimeout, tr.MaxIdleConnsPerHost, tr.MaxResponseHeaderBytes)
	}
}

// TestNewTransport_HTTP2AndVerifiedTLS: against an upstream offering
// HTTP/2 over TLS, the transport speaks HTTP/2 once it trusts the
// upstream's certificate, and refuses the upstream while it does not.
func TestNewTransport_HTTP2AndVerifiedTLS(t *testing.T) {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	up.EnableHTTP2 = true
	up.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	up.StartTLS()
	t.Cleanup(up.Close)

	untrusted := NewTransport(TransportOptions{})
	t.Cleanup(untrusted.CloseIdleConnections)
	if resp, err := (&http.Client{Transport: untrusted}).Get(up.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate from an unknown CA was accepted: TLS is not verified")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unknown CA: err %v, want a certificate error", err)
	}

	tr := NewTransport(TransportOptions{})
	t.Cleanup(tr.CloseIdleConnections)
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = pool
	resp, err := (&http.Client{Transport: tr}).Get(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(body) != "HTTP/2.0" {
		t.Errorf("the answer came over %s (the upstream saw %q), want HTTP/2", resp.Proto, body)
	}
}

// Outbound is the transport inference, decide, Fountain and the pool
// forward through: a given transport or the default one, each behind
// quiet.Errors.
func TestOutbound_QuietOverGivenOrDefault(t *testing.T) {
	for _, rt := range []http.RoundTripper{nil, NewTransport(TransportOptions{})} {
		out := Outbound(rt)
		if out == nil || out == rt {
			t.Fatalf("Outbound(%T) = %T, want a quiet transport over it", rt, out)
		}
		if again := quiet.Errors(out); again != out {
			t.Errorf("quiet.Errors(Outbound(%T)) made another wrapper; want Outbound's own, a quiet one", rt)
		}
	}
}

// Masked is the credential mask of inference, its cloud transport and
// decide: each value, as written or escaped, becomes as many asterisks
// as it spanned.
func TestMasked_KeepsLength(t *testing.T) {
	in := `key sk-ant-1 and "sk\u002dant-1" and cloud%2Fsecret`
	got, n := NewFormSet(append(Masked("sk-ant-1"), Masked([]byte("cloud/secret"))...)).RedactString(in)
	want := `key ******** and "*************" and **************`
	if got != want || n != 3 {
		t.Errorf("RedactString(%q) = %q (%d), want %q (3)", in, got, n, want)
	}
}

// TestClassify_BrokersRefusalIsKept: a refusal the broker made beneath a
// transport (decide's payer a cloud account, 400 not_supported), wrapped
// on its way up, was answered as the upstream's failure: 502
// "could not be reached", counted under upstream_failed. It is answered
// as made, and the caller's additions to it do not reach the original.
func TestClassify_BrokersRefusalIsKept(t *testing.T) {
	made := capability.Refuse(capability.ReasonNotSupported, "decide is not available while this box's model calls are paid through Amazon Bedrock.").At(http.StatusBadRequest)
	err := fmt.Errorf("pool entry bedrock: %w", made)
	got := Classify(err, "Anthropic API")
	if got.Status != http.StatusBadRequest || got.Reason != capability.ReasonNotSupported || got.Message != made.Message {
		t.Errorf("Classify(%q) = %d %s %q, want %d %s %q", err, got.Status, got.Reason, got.Message, http.StatusBadRequest, capability.ReasonNotSupported, made.Message)
	}
	got.Message += " Question q has no answer."
	if strings.Contains(made.Message, "Question") {
		t.Errorf("the caller's addition reached the refusal made: %q", made.Message)
	}

	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	var logs strings.Builder
	ErrorHandler(slog.New(slog.NewTextHandler(&logs, nil)), "Anthropic API")(w, r, err)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Amazon Bedrock") || strings.Contains(w.Body.String(), "could not be reached") {
		t.Errorf("ErrorHandler(%q) = %d %s, want 400 with the refusal's message", err, w.Code, w.Body)
	}
	// The log says the broker refused, not that the upstream failed: an
	// operator reading it looks for no fault in the upstream.
	if !strings.Contains(logs.String(), "proxy: refused by the broker") || strings.Contains(logs.String(), "upstream failed") {
		t.Errorf("ErrorHandler(%q) logged %q, want the broker's refusal, not an upstream's failure", err, logs.String())
	}
}
