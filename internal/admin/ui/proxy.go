package ui

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxyca"
)

// The owner's page's Proxy CA page: the egress proxy's CA as the operator
// service's ProxyCA view gives it (what `boxbroker proxy ca` prints and
// GET /api/proxy/ca answers), each certificate with its name, SHA-256
// fingerprint and validity, its PEM to copy and all of them to download;
// and a form that rotates it (operator.Service.RotateProxyCA, which
// audits) once "rotate" is typed. The view carries certificates only:
// the CA's key stays sealed in the store (package proxyca) and never
// reaches the page.

// caCert is one certificate of the proxy's CA as the page shows it.
type caCert struct {
	PEM         string
	Subject     string
	Fingerprint string // SHA-256 of the certificate, colon-separated hex
	NotBefore   string
	NotAfter    string
	// Left is how long is left until NotAfter; Expired is set once it
	// is past.
	Left    string
	Expired bool
	// From is, for a pending rotation's CA, when it signs from; "" for
	// the CA that signs now.
	From string
}

// proxyPageData is the Proxy CA page's content.
type proxyPageData struct {
	chrome
	// None: the store holds no CA yet.
	None  bool
	Certs []caCert
	// Grace is the rotate form's grace, as typed.
	Grace string
}

// defaultGrace is the rotate form's grace when none is typed, as the
// CLI's --grace and the API's grace default.
var defaultGrace = shortDuration(proxyca.DefaultRotateGrace)

// errNoProxyCA answers the CA's download before a CA is made.
var errNoProxyCA = operator.Errorf(operator.NotFound,
	"The egress proxy has no CA yet. serve --proxy-listen makes it as the proxy starts, and so do `boxbroker proxy ca`, GET /api/proxy/ca and a rotation.")

func (u *Page) proxyPage(w http.ResponseWriter, r *http.Request, sess *Session) error {
	v, ok, err := u.a.Operator().StoredProxyCA(r.Context())
	if err != nil {
		return err
	}
	d := proxyPageData{chrome: u.chrome(r, sess), None: !ok, Grace: defaultGrace}
	if ok {
		if d.Certs, err = caCerts(v, u.cfg.Now()); err != nil {
			return err
		}
	}
	u.render(w, http.StatusOK, "proxy", d)
	return nil
}

// caCerts reads v's certificates: the CA that signs now, then a pending
// rotation's, which signs from v.NextFrom.
func caCerts(v operator.ProxyCAView, now time.Time) ([]caCert, error) {
	var certs []caCert
	rest := []byte(v.Certificates)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if block.Type != "CERTIFICATE" || err != nil {
			return nil, fmt.Errorf("the proxy CA's certificate %d does not parse: %v", len(certs)+1, err)
		}
		certs = append(certs, caCert{
			PEM: string(pem.EncodeToMemory(block)), Subject: c.Subject.String(),
			Fingerprint: strings.ReplaceAll(fmt.Sprintf("% X", sha256.Sum256(c.Raw)), " ", ":"),
			NotBefore:   utcMinute(c.NotBefore), NotAfter: utcMinute(c.NotAfter),
			Left: left(c.NotAfter.Sub(now)), Expired: !now.Before(c.NotAfter),
		})
	}
	if len(certs) == 0 {
		return nil, errors.New("the proxy CA's view holds no certificate")
	}
	if v.NextFrom != nil && len(certs) > 1 {
		from, _ := time.Parse(time.RFC3339, *v.NextFrom)
		certs[1].From = utcMinute(from)
	}
	return certs, nil
}

// left writes how long is left of a certificate's life: in days from
// two days up, in hours below.
func left(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return fmt.Sprintf("%d hours", int(d.Hours()))
}

// utcMinute writes t as the page writes a moment to the minute.
func utcMinute(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// proxyCAPEM downloads the certificates a box is to trust, as `boxbroker
// proxy ca` prints them.
func (u *Page) proxyCAPEM(w http.ResponseWriter, r *http.Request, sess *Session) error {
	v, ok, err := u.a.Operator().StoredProxyCA(r.Context())
	if err != nil {
		return err
	}
	if !ok {
		return errNoProxyCA
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Disposition", `attachment; filename="boxbroker-proxy-ca.pem"`)
	_, err = w.Write([]byte(v.Certificates))
	return err
}

// errGrace refuses a rotation's grace that is not a duration.
var errGrace = operator.Errorf(operator.Invalid,
	"The grace is a duration such as 168h, or 0s to switch at once; nothing was rotated.")

// rotateProxyCA rotates the egress proxy's CA once "rotate" is typed
// again, the current CA signing on for the form's grace (as `proxy ca
// rotate --grace`).
func rotateProxyCA(f *formPost) error {
	typed := f.get("grace")
	grace, ok := proxyca.ParseGrace(typed)
	if !ok {
		typed = defaultGrace // the form is shown again without what was refused
	}
	if !f.confirmed("rotate", "proxy-rotate", formPage{Grace: typed, Error: "Type rotate to rotate the CA; nothing was rotated."}) {
		return nil
	}
	if !ok {
		return errGrace
	}
	_, err := f.op.RotateProxyCA(f.ctx(), grace)
	return err
}
