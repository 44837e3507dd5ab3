package ui_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// proxyCA is the store's proxy CA; ok is false when there is none.
func proxyCA(t *testing.T, b *brokertest.Broker) (ca store.ProxyCA, ok bool) {
	t.Helper()
	ca, err := b.Server.Store.ProxyCA(context.Background())
	if errors.Is(err, store.ErrNotFound) {
		return ca, false
	}
	if err != nil {
		t.Fatalf("the store's proxy CA: %v", err)
	}
	return ca, true
}

// caKeyForms are the forms the CA's key (its sealed key, opened) could
// take on a page: its DER in PEM, and that DER in base64 alone.
func caKeyForms(t *testing.T, b *brokertest.Broker, sealed []byte) []string {
	t.Helper()
	der, err := b.Server.Keyring.Open(sealed, "proxy-ca")
	if err != nil {
		t.Fatalf("open the CA's key: %v", err)
	}
	if _, err := x509.ParseECPrivateKey(der); err != nil {
		t.Fatalf("the CA's key: %v", err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	return []string{keyPEM, base64.StdEncoding.EncodeToString(der), base64.StdEncoding.EncodeToString(der)[:40]}
}

// TestUI_ProxyCAShowsCertificatesNeverKey: before the proxy ever ran the
// page says there is no CA and makes none; once there is one it shows
// its certificate and fingerprint, and downloads its PEM, and neither
// holds the CA's key.
func TestUI_ProxyCAShowsCertificatesNeverKey(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie := signIn(t, b, b.AdminToken)
	p := visit(t, b, "GET", "/ui/proxy", cookie, nil, nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="no-ca"`) || !strings.Contains(p.body, "serve --proxy-listen") {
		t.Fatalf("GET /ui/proxy with no CA = %d, want 200 saying there is none and how it is made:\n%s", p.status, p.body)
	}
	if _, ok := proxyCA(t, b); ok {
		t.Fatalf("GET /ui/proxy made a CA")
	}
	if p := visit(t, b, "GET", "/ui/proxy/ca.pem", cookie, nil, nil); p.status != http.StatusNotFound || !strings.Contains(p.body, "no CA yet") {
		t.Errorf("GET /ui/proxy/ca.pem with no CA = %d, want 404 saying there is none:\n%s", p.status, p.body)
	}

	if _, err := b.Server.Admin.Operator().ProxyCA(context.Background()); err != nil { // as the proxy's start, or `proxy ca`, makes it
		t.Fatal(err)
	}
	ca, _ := proxyCA(t, b)
	block, _ := pem.Decode(ca.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	p = visit(t, b, "GET", "/ui/proxy", cookie, nil, nil)
	p.body = html.UnescapeString(p.body)
	dl := visit(t, b, "GET", "/ui/proxy/ca.pem", cookie, nil, nil)
	if p.status != http.StatusOK || !strings.Contains(p.body, string(ca.CertPEM)) || !strings.Contains(p.body, "Signs now") ||
		!strings.Contains(p.body, cert.Subject.CommonName) || strings.Contains(p.body, `id="ca-next"`) {
		t.Errorf("GET /ui/proxy = %d, want the CA's certificate, signing now, and no other:\n%s", p.status, p.body)
	}
	if dl.status != http.StatusOK || dl.body != string(ca.CertPEM) || !strings.Contains(dl.header.Get("Content-Disposition"), "boxbroker-proxy-ca.pem") {
		t.Errorf("GET /ui/proxy/ca.pem = %d %q %q, want the certificate as a download", dl.status, dl.header.Get("Content-Disposition"), dl.body)
	}
	for _, body := range []string{p.body, dl.body} {
		if strings.Contains(body, "PRIVATE KEY") {
			t.Errorf("the page holds a private key's PEM:\n%s", body)
		}
		for _, key := range caKeyForms(t, b, ca.SealedKey) {
			if strings.Contains(body, key) {
				t.Errorf("the page holds the CA's key (%.20s…)", key)
			}
		}
	}
}

// TestUI_RotateProxyCA rotates the CA from the page: a wrong confirmation
// or grace rotates nothing; a grace lists the new CA beside the current
// one, with the moment it signs from; 0s replaces the current one; each
// rotation is audited with the page's route.
func TestUI_RotateProxyCA(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie, csrf := signedInForm(t, b)
	if _, err := b.Server.Admin.Operator().ProxyCA(context.Background()); err != nil {
		t.Fatal(err)
	}
	first, _ := proxyCA(t, b)
	rotate := func(grace, confirm string) page {
		t.Helper()
		return visit(t, b, "POST", "/ui/proxy/ca/rotate", cookie, url.Values{"csrf": {csrf}, "grace": {grace}, "confirm": {confirm}}, nil)
	}

	if p := rotate("0s", "yes"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "Type rotate") {
		t.Errorf("rotate confirmed with yes = %d, want 400 asking again:\n%s", p.status, p.body)
	}
	if p := rotate("a week", "rotate"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "The grace is a duration") {
		t.Errorf("rotate with grace %q = %d, want 400 saying what a grace is:\n%s", "a week", p.status, p.body)
	}
	if p := rotate("-1h", "rotate"); p.status != http.StatusBadRequest {
		t.Errorf("rotate with grace -1h = %d, want 400:\n%s", p.status, p.body)
	}
	if ca, _ := proxyCA(t, b); string(ca.CertPEM) != string(first.CertPEM) || len(ca.NextCertPEM) != 0 {
		t.Fatalf("refused rotations changed the CA")
	}

	p := rotate("48h", "rotate")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/proxy?done=rotated" {
		t.Fatalf("rotate with grace 48h = %d to %q, want 303 to /ui/proxy?done=rotated:\n%s", p.status, p.header.Get("Location"), p.body)
	}
	pending, _ := proxyCA(t, b)
	if string(pending.CertPEM) != string(first.CertPEM) || len(pending.NextCertPEM) == 0 {
		t.Fatalf("after a rotation with a grace the CA is %q then %q, want the first then a new one", pending.CertPEM, pending.NextCertPEM)
	}
	v := visit(t, b, "GET", "/ui/proxy?done=rotated", cookie, nil, nil)
	v.body = html.UnescapeString(v.body)
	if !strings.Contains(v.body, `id="notice"`) || !strings.Contains(v.body, string(first.CertPEM)) || !strings.Contains(v.body, string(pending.NextCertPEM)) ||
		!strings.Contains(v.body, `id="ca-next"`) || !strings.Contains(v.body, "Signs from "+pending.NextFrom.UTC().Format("2006-01-02 15:04 UTC")) {
		t.Errorf("the page after a rotation with a grace: want the notice, both certificates, the new one signing from %v:\n%s", pending.NextFrom, v.body)
	}
	if dl := visit(t, b, "GET", "/ui/proxy/ca.pem", cookie, nil, nil); dl.body != string(first.CertPEM)+string(pending.NextCertPEM) {
		t.Errorf("GET /ui/proxy/ca.pem during the grace = %q, want both certificates", dl.body)
	}
	if strings.Contains(v.body, "PRIVATE KEY") {
		t.Errorf("the page holds a private key's PEM:\n%s", v.body)
	}
	for _, key := range append(caKeyForms(t, b, pending.SealedKey), caKeyForms(t, b, pending.NextSealedKey)...) {
		if strings.Contains(v.body, key) {
			t.Errorf("the page holds a CA's key (%.20s…)", key)
		}
	}

	if p := rotate("0s", "rotate"); p.status != http.StatusSeeOther {
		t.Fatalf("rotate with grace 0s = %d:\n%s", p.status, p.body)
	}
	now, _ := proxyCA(t, b)
	if string(now.CertPEM) == string(first.CertPEM) || string(now.CertPEM) == string(pending.NextCertPEM) || len(now.NextCertPEM) != 0 {
		t.Fatalf("after a rotation with grace 0s the current certificate is unchanged or a pending one is left")
	}
	v = visit(t, b, "GET", "/ui/proxy", cookie, nil, nil)
	v.body = html.UnescapeString(v.body)
	if !strings.Contains(v.body, string(now.CertPEM)) || strings.Contains(v.body, string(first.CertPEM)) || strings.Contains(v.body, `id="ca-next"`) {
		t.Errorf("the page after a rotation with grace 0s: want the new certificate alone:\n%s", v.body)
	}

	entries, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var rotations []string
	for _, e := range entries {
		if e.Capability == store.ActorAdmin && e.Route == "/ui/proxy/ca/rotate" && strings.HasPrefix(e.Message, "rotated the egress proxy's CA") {
			rotations = append(rotations, e.Message)
		}
	}
	if len(rotations) != 2 {
		t.Errorf("audit rows of the page's rotations = %q, want 2", rotations)
	}
}

// TestUI_Prices shows the price table the broker charges by on the spend
// page: each model with its rates per million tokens, a long context's
// rates beside them, and the model an unknown one is charged as.
func TestUI_Prices(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie := signIn(t, b, b.AdminToken)
	p := visit(t, b, "GET", "/ui/spend", cookie, nil, nil)
	if p.status != http.StatusOK {
		t.Fatalf("GET /ui/spend = %d", p.status)
	}
	prices := section(t, p.body, "prices")
	row := func(model string) string {
		i := strings.Index(prices, `<tr id="price-`+model+`">`)
		if i < 0 {
			t.Fatalf("the price table has no row for %s:\n%s", model, prices)
		}
		return prices[i : i+strings.Index(prices[i:], "</tr>")]
	}
	for _, tt := range []struct {
		model string
		want  []string
	}{
		{"claude-haiku-4-5", []string{"$1.00", "$5.00", "$1.25", "$2.00", "$0.10", "200K"}},
		{"claude-3-haiku", []string{"$0.25", "$1.25", "$0.30", "$0.50", "$0.03"}},
		{"claude-opus-5", []string{"$5.00", "$25.00", "$6.25", "$10.00", "$0.50", "1M"}},
	} {
		r := row(tt.model)
		for _, w := range tt.want {
			if !strings.Contains(r, `<td class="num">`+w+`</td>`) {
				t.Errorf("the price row of %s = %s, want %s in it", tt.model, r, w)
			}
		}
	}
	if !strings.Contains(prices, "input over 200K tokens") || !strings.Contains(prices, "$22.50") {
		t.Errorf("the price table shows no long-context rates for claude-sonnet-4-5:\n%s", prices)
	}
	table, err := b.Server.Admin.Operator().Prices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prices, "<code>"+table.UnpricedAs+"</code>") || !strings.Contains(prices, "The built-in table") {
		t.Errorf("the price table does not say it is the built-in one, or what an unknown model is charged as (%s):\n%s", table.UnpricedAs, prices)
	}
}
