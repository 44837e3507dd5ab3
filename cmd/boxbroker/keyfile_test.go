package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServe_KeyGivenForItsFileIsNeverShown: an operator who gives the
// TLS private key itself, or the single sign-on client's secret, where
// serve takes the path of a file holding it (BOXBROKER_TLS_KEY,
// BOXBROKER_SSO_CLIENT_SECRET_FILE, as a container's secret is often put
// in a variable) finds it neither as the flag's default in serve -h nor
// in serve's refusal, which a terminal's scrollback or a log keeps.
func TestServe_KeyGivenForItsFileIsNeverShown(t *testing.T) {
	const keyPEM = "-----BEGIN PRIVATE KEY-----\nXtlskey1\n-----END PRIVATE KEY-----\n"
	cert := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(cert, selfSigned(t), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		secret  string
		refusal string // the refusal names the flag
	}{
		{"key for --tls-key", map[string]string{"BOXBROKER_TLS_CERT": cert, "BOXBROKER_TLS_KEY": keyPEM}, "Xtlskey1", "--tls-key"},
		{"key for --tls-key, certificate missing", map[string]string{"BOXBROKER_TLS_CERT": filepath.Join(t.TempDir(), "missing.crt"), "BOXBROKER_TLS_KEY": keyPEM}, "Xtlskey1", "--tls-cert"},
		{"secret for --sso-client-secret-file", map[string]string{"BOXBROKER_SSO_ISSUER": "https://idp.example", "BOXBROKER_SSO_CLIENT_ID": "boxbroker",
			"BOXBROKER_SSO_CLIENT_SECRET_FILE": "Xssosecret2"}, "Xssosecret2", "--sso-client-secret-file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["BOXBROKER_DATA"] = t.TempDir()
			out, errs, _ := runIn(t, tt.env, "", "serve", "-h")
			if strings.Contains(out+errs, tt.secret) {
				t.Errorf("serve -h shows the key:\n%s", out+errs)
			}
			out, errs, code := runIn(t, tt.env, "", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off")
			if code == 0 || strings.Contains(out+errs, tt.secret) || !strings.Contains(errs, tt.refusal) {
				t.Errorf("serve = %d, stdout %q, stderr %q; want a refusal naming %s, never the key", code, out, errs, tt.refusal)
			}
		})
	}
	// A key's path given on the command line is still taken over the
	// variable.
	key := filepath.Join(t.TempDir(), "tls.key")
	_, errs, code := runIn(t, map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_TLS_CERT": cert, "BOXBROKER_TLS_KEY": keyPEM},
		"", "serve", "--listen", "127.0.0.1:0", "--admin-listen", "off", "--tls-key", key)
	if code == 0 || !strings.Contains(errs, "--tls-key") || strings.Contains(errs, "Xtlskey1") {
		t.Errorf("serve --tls-key MISSING = %d %q, want a refusal of the missing file", code, errs)
	}
}

// TestServe_KeyGivenForTheCertificatesPathIsNeverShown: the TLS key (or
// another value that is no path: a PEM block, a long run of base64)
// given where serve takes the certificate's path (BOXBROKER_TLS_CERT,
// --tls-cert) is neither the flag's default in serve -h nor quoted in
// serve's refusal, which names the flag; a path is still named.
func TestServe_KeyGivenForTheCertificatesPathIsNeverShown(t *testing.T) {
	key := filepath.Join(t.TempDir(), "tls.key")
	for _, v := range []string{
		"-----BEGIN PRIVATE KEY-----\nXtlscert1\n-----END PRIVATE KEY-----\n",
		"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgXtlscert1",
	} {
		env := map[string]string{"BOXBROKER_DATA": t.TempDir(), "BOXBROKER_TLS_CERT": v, "BOXBROKER_TLS_KEY": key}
		out, errs, _ := runIn(t, env, "", "serve", "-h")
		if strings.Contains(out+errs, "Xtlscert1") {
			t.Errorf("serve -h shows BOXBROKER_TLS_CERT's value:\n%s", out+errs)
		}
		for _, args := range [][]string{{}, {"--tls-cert", v}} {
			args = append([]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "off"}, args...)
			out, errs, code := runIn(t, env, "", args...)
			if code == 0 || strings.Contains(out+errs, "Xtlscert1") || !strings.Contains(errs, "--tls-cert") {
				t.Errorf("serve with a key for the certificate = %d, stdout %q, stderr %q; want a refusal naming --tls-cert, never the value", code, out, errs)
			}
		}
	}
}

// selfSigned is a self-signed certificate in PEM.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
