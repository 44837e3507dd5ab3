package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/quiet"
)

// maxPathShown bounds the certificate's path a refusal quotes.
const maxPathShown = 1024

// maxPEMFile bounds the certificate and key files read: a chain of
// certificates is a few KiB.
const maxPEMFile = 1 << 20

// loadKeyPair is tls.LoadX509KeyPair, each file judged as opened
// (filelock.ReadFile: a FIFO is refused, not waited on; a file over
// maxPEMFile is not read whole), with refusals that name the flags
// and never quote keyFile: it is a path, but an operator may give the
// key itself there (a container's secret put in BOXBROKER_TLS_KEY), which
// a refusal quoting it would put in the log. certFile is quoted only
// when it reads as a path (quiet.Shown): the key, pasted into
// BOXBROKER_TLS_CERT in its place, is not.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := filelock.ReadFile(certFile, maxPEMFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("cannot %s %s: %w", pe.Op, quiet.Shown(certFile, maxPathShown), pe.Err)
		}
		return tls.Certificate{}, fmt.Errorf("configuration: --tls-cert (BOXBROKER_TLS_CERT): %w", err)
	}
	keyPEM, err := filelock.ReadFile(keyFile, maxPEMFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("cannot %s the file it names: %w", pe.Op, pe.Err)
		}
		return tls.Certificate{}, fmt.Errorf("configuration: --tls-key (BOXBROKER_TLS_KEY): %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("configuration: --tls-cert %s and --tls-key (BOXBROKER_TLS_CERT, BOXBROKER_TLS_KEY) are not a PEM certificate and its key: %w", quiet.Shown(certFile, maxPathShown), err)
	}
	return c, nil
}
