package sso_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/sso/ssotest"
)

// TestFinish_TokenEndpointRedirectIsNotFollowed: the provider's token
// endpoint (or whoever answers at its address) answering the code
// exchange with a 307 to an address of its own choosing, plain http on
// another machine or inside the operator's network. Followed, the
// client would post the code, the PKCE verifier and the client's secret
// there again. The redirect is not followed: the other address receives
// nothing, and the sign-in fails as the provider's.
func TestFinish_TokenEndpointRedirectIsNotFollowed(t *testing.T) {
	const secret = "client-secret-redirected-0123456789"
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	t.Cleanup(other.Close)
	idp := ssotest.New(t, "boxbroker", secret)
	idp.SignInAs("u1", map[string]any{"email": "ops@example.com", "email_verified": true})
	idp.RedirectToken(other.URL + "/collect")
	p, err := sso.New(sso.Config{Issuer: idp.URL, ClientID: "boxbroker", ClientSecret: secret,
		RedirectURL: "http://127.0.0.1:8788" + sso.CallbackPath, Operators: []string{"ops@example.com"}}, plainSealer{}, nil)
	if err != nil {
		t.Fatal(err)
	}

	start := httptest.NewRecorder()
	if err := p.Start(start, httptest.NewRequest(http.MethodGet, sso.StartPath, nil)); err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.Get(start.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if !strings.Contains(back, "code=") {
		t.Fatalf("the provider sent the browser to %q, want the callback with a code", back)
	}
	cb := httptest.NewRequest(http.MethodGet, back, nil)
	for _, c := range start.Result().Cookies() {
		cb.AddCookie(c)
	}
	_, err = p.Finish(httptest.NewRecorder(), cb)
	if !errors.Is(err, sso.ErrProvider) {
		t.Errorf("Finish with the token endpoint redirecting = %v, want %v", err, sso.ErrProvider)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) > 0 {
		t.Errorf("the code exchange went on to the address the provider named: %q", elsewhere)
	}
}
