package main

import (
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
)

// TestCLI_ProxyCA: `proxy ca` prints the CA's certificate, the same one
// each time, and never its key; it needs existing data.
func TestCLI_ProxyCA(t *testing.T) {
	dir := t.TempDir()
	if _, errs, code := run(t, dir, "", "proxy", "ca"); code == 0 || !strings.Contains(errs, "no boxbroker data") {
		t.Errorf("proxy ca with no data = %d %q, want the no-data error", code, errs)
	}
	if _, _, code := run(t, dir, "", "box", "add", "shop"); code != 0 {
		t.Fatalf("box add = %d", code)
	}
	out, errs, code := run(t, dir, "", "proxy", "ca")
	if code != 0 {
		t.Fatalf("proxy ca = %d %q", code, errs)
	}
	if strings.Contains(out+errs, "PRIVATE KEY") {
		t.Errorf("proxy ca printed a private key")
	}
	block, rest := pem.Decode([]byte(out))
	if block == nil || strings.TrimSpace(string(rest)) != "" {
		t.Fatalf("proxy ca printed %q, want one PEM certificate", out)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !cert.IsCA {
		t.Fatalf("proxy ca's certificate: %v, IsCA %v", err, cert != nil && cert.IsCA)
	}
	if again, _, _ := run(t, dir, "", "proxy", "ca"); again != out {
		t.Errorf("a second proxy ca printed another certificate")
	}
	if _, errs, code := run(t, dir, "", "proxy", "key"); code != 2 {
		t.Errorf("proxy key = %d %q, want a usage error", code, errs)
	}
}
