package main

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/proxyca"
	"github.com/intentius/boxbroker/internal/server"
)

// TestCLI_ProxyCARotate: `proxy ca rotate` asks first (or takes --yes),
// prints the new CA's certificate alone and never a key; through the
// grace `proxy ca` prints the current CA and the new one, and the proxy
// still signs with the current; with --grace 0 the newest signs at once
// and `proxy ca` prints it alone.
func TestCLI_ProxyCARotate(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "proxy", "ca", "rotate", "--yes"); code == 0 || !strings.Contains(errs, "no boxbroker data") {
		t.Errorf("proxy ca rotate with no data = %d %q, want the no-data error", code, errs)
	}
	if _, _, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	first, _, code := run(t, dir, "", "proxy", "ca")
	if code != 0 {
		t.Fatalf("proxy ca = %d", code)
	}
	if out, errs, code := run(t, dir, "n\n", "proxy", "ca", "rotate"); code == 0 || out != "" || !strings.Contains(errs, "not rotated") {
		t.Errorf("proxy ca rotate answered no = %d %q %q, want it refused", code, out, errs)
	}
	if again, _, _ := run(t, dir, "", "proxy", "ca"); again != first {
		t.Errorf("a rotation answered no changed the CA")
	}
	if _, errs, code := run(t, dir, "", "proxy", "ca", "rotate", "--grace", "-1h", "--yes"); code != 2 {
		t.Errorf("proxy ca rotate --grace -1h = %d %q, want a usage error", code, errs)
	}

	out, errs, code := run(t, dir, "y\n", "proxy", "ca", "rotate", "--grace", "48h")
	if code != 0 {
		t.Fatalf("proxy ca rotate = %d %q", code, errs)
	}
	if strings.Contains(out+errs, "PRIVATE KEY") {
		t.Errorf("proxy ca rotate printed a private key")
	}
	next := certs(t, out)
	if len(next) != 1 || !next[0].IsCA || out == first || !strings.Contains(errs, "from ") {
		t.Fatalf("proxy ca rotate printed %q (stderr %q), want one new CA certificate and when it signs", out, errs)
	}
	if life := next[0].NotAfter.Sub(next[0].NotBefore); life > 366*24*time.Hour {
		t.Errorf("the new CA lives %v, want at most a year", life)
	}
	during, _, _ := run(t, dir, "", "proxy", "ca")
	if got := certs(t, during); len(got) != 2 || during != first+out {
		t.Errorf("proxy ca during the grace printed %d certificates, want the current and the new", len(got))
	}
	signer(t, dir, certs(t, first)[0])

	newest, errs, code := run(t, dir, "", "proxy", "ca", "rotate", "--grace", "0", "--yes")
	if code != 0 {
		t.Fatalf("proxy ca rotate --grace 0 = %d %q", code, errs)
	}
	if !strings.Contains(errs, "prints this one alone") || strings.Contains(errs, "until then") {
		t.Errorf("proxy ca rotate --grace 0 said %q, want it to say the new CA signs alone, no grace", errs)
	}
	if after, _, _ := run(t, dir, "", "proxy", "ca"); after != newest || newest == out || newest == first {
		t.Errorf("proxy ca after a rotation with no grace printed %q, want the newest CA alone (%q)", after, newest)
	}
	signer(t, dir, certs(t, newest)[0])
}

// signer checks that a leaf the proxy mints from dir's store chains to
// want.
func signer(t *testing.T, dir string, want *x509.Certificate) {
	t.Helper()
	cfg := server.Config{DataDir: dir}
	st, err := openExisting(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keyring, err := server.LoadKeyring(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := proxyca.Load(t.Context(), st, keyring, nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(want)
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "api.example.com"}); err != nil {
		t.Errorf("the proxy's leaf does not chain to %s: %v", want.Subject.CommonName, err)
	}
}

func certs(t *testing.T, s string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	b := []byte(s)
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			if strings.TrimSpace(string(b)) != "" {
				t.Fatalf("%q is not PEM certificates only", s)
			}
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}
