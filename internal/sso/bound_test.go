package sso_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc/oidctest"

	"github.com/intentius/boxbroker/internal/sso"
)

// plainSealer seals nothing: the flow cookie's contents are no concern
// here.
type plainSealer struct{}

func (plainSealer) Seal(b []byte, _ string) ([]byte, error) { return b, nil }
func (plainSealer) Open(b []byte, _ string) ([]byte, error) { return b, nil }

// TestProvider_AnswersAreBounded: an identity provider (hostile, or
// broken behind a proxy that answers for it) answering its discovery
// document without end, or refusing with a body of megabytes. Any
// client that reaches /ui/sso/start has the broker ask for discovery
// again while it fails, so what is read of each answer is bounded, and
// the error, which the owner's page logs, quotes a KiB or so of it.
func TestProvider_AnswersAreBounded(t *testing.T) {
	const endless = 96 << 20
	var written atomic.Int64
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		if strings.HasPrefix(r.URL.Path, "/refuse/") {
			w.WriteHeader(http.StatusBadGateway)
			for range (4 << 20) / len(chunk) {
				_, _ = w.Write(chunk)
			}
			return
		}
		_, _ = w.Write([]byte(`{"issuer":"`))
		for written.Load() < endless {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(idp.Close)

	start := func(issuer string) error {
		p, err := sso.New(sso.Config{Issuer: issuer, ClientID: "boxbroker", RedirectURL: "http://127.0.0.1:8788" + sso.CallbackPath,
			Operators: []string{"ops@example.com"}}, plainSealer{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Start(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, sso.StartPath, nil))
	}

	if err := start(idp.URL + "/endless"); err == nil {
		t.Fatal("Start with a discovery document without end succeeded")
	}
	t.Logf("the provider wrote %.1f MiB before the broker stopped reading", float64(written.Load())/(1<<20))
	// The provider's writes stop once the broker stops reading: what it
	// wrote is what was read, and what the connection's buffers held.
	if n := written.Load(); n >= endless/3 {
		t.Errorf("the broker read %d MiB of a discovery document, want it to stop at its bound", n>>20)
	}

	err := start(idp.URL + "/refuse")
	if err == nil {
		t.Fatal("Start with a refused discovery succeeded")
	}
	if len(err.Error()) > 4<<10 {
		t.Errorf("Start's error, which the page logs, is %d bytes of the provider's answer; want a KiB or so", len(err.Error()))
	}
}

// TestProvider_AnswerHeaderIsBounded: the identity provider (or whoever
// answers at its address, or a proxy on the way) answering with a
// header of a MiB, which Go's client would read to 10 MiB and hold at
// each discovery asked again. Past 64 KiB, as every upstream's answer,
// the answer is an error, not read.
func TestProvider_AnswerHeaderIsBounded(t *testing.T) {
	disc := &oidctest.Server{}
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", 1<<20))
		disc.ServeHTTP(w, r)
	}))
	t.Cleanup(idp.Close)
	disc.SetIssuer(idp.URL)
	p, err := sso.New(sso.Config{Issuer: idp.URL, ClientID: "boxbroker", RedirectURL: "http://127.0.0.1:8788" + sso.CallbackPath,
		Operators: []string{"ops@example.com"}}, plainSealer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Start(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, sso.StartPath, nil))
	if !errors.Is(err, sso.ErrProvider) {
		t.Errorf("Start with a discovery answer whose header is a MiB = %v, want %v", err, sso.ErrProvider)
	}
}
