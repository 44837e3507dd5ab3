package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// upstreamName is the DNS name the stand-in's certificate carries beside
// its IP address: nginx checks a proxied server's certificate against a
// name (proxy_ssl_name), never against an IP address.
const upstreamName = "upstream.bench.test"

// certFiles are the PEM files of a run's certificate authority and of the
// stand-in's certificate, which that authority signed.
type certFiles struct {
	ca, cert, key string
}

// writeCerts makes a certificate authority for the run (ECDSA P-256,
// valid for a day) and a server certificate it signs for ip and
// upstreamName, and writes them as PEM files in dir: ca.pem (what a
// client trusts), upstream.crt and upstream.key (what the stand-in
// serves). The authority's key is not kept.
func writeCerts(dir string, ip net.IP) (certFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "boxbroker bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return certFiles{}, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return certFiles{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return certFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: upstreamName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		DNSNames:     []string{upstreamName},
		IPAddresses:  []net.IP{ip},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return certFiles{}, fmt.Errorf("server certificate: %w", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return certFiles{}, err
	}
	f := certFiles{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "upstream.crt"), key: filepath.Join(dir, "upstream.key")}
	for _, w := range []struct {
		name, typ string
		der       []byte
	}{{f.ca, "CERTIFICATE", caDER}, {f.cert, "CERTIFICATE", der}, {f.key, "PRIVATE KEY", kb}} {
		if err := os.WriteFile(w.name, pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der}), 0o600); err != nil {
			return certFiles{}, err
		}
	}
	return f, nil
}

// rootsFrom is a certificate pool holding the PEM certificates of file.
func rootsFrom(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no certificate", file)
	}
	return pool, nil
}
