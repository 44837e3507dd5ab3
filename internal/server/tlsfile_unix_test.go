//go:build unix

package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/intentius/boxbroker/internal/filelock/filelocktest"
)

// TestLoadKeyPair_FilesJudgedAsOpened: a FIFO given (or put) as the
// certificate or the key is refused, naming the flag, not waited on for
// a writer (serve hung at start); a file over 1 MiB, far more than a
// chain of certificates, is refused, not read whole (a link to
// /dev/zero was read until memory ran out). The key's path is named in
// neither.
func TestLoadKeyPair_FilesJudgedAsOpened(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular.pem")
	if err := os.WriteFile(regular, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxPEMFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for _, c := range []struct{ name, cert, key, flag, words string }{
		{"a FIFO as the certificate", fifo, regular, "--tls-cert", "a FIFO"},
		{"a FIFO as the key", regular, fifo, "--tls-key", "a FIFO"},
		{"a certificate over 1 MiB", big, regular, "--tls-cert", "larger than"},
		{"a key over 1 MiB", regular, big, "--tls-key", "larger than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := filelocktest.Fed(t, fifo, "", func() error {
				_, err := loadKeyPair(c.cert, c.key)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), c.flag) || !strings.Contains(err.Error(), c.words) || strings.Contains(err.Error(), c.key) {
				t.Errorf("loadKeyPair = %v, want a refusal naming %s and %q, not the key's path", err, c.flag, c.words)
			}
		})
	}
}
