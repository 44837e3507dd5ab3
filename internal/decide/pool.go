package decide

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/capability"
)

// paying is the credential one decide request's questions are asked on.
// When the operator's pool pays, a question the entry refuses (429, 529,
// a 5xx overloaded_error, 401, 403) moves the request to the pool's next
// healthy entry and is asked again there; questions asked at once share
// the move.
type paying struct {
	c  *Capability
	mu sync.Mutex // guards paid
	// paid is the entry asked now; its Failover is nil for a payer's own
	// credential.
	paid capability.Paid
}

// now returns the credential and Messages URL to ask on, and the entry's
// name ("" for a payer's own credential).
func (p *paying) now() (cred []byte, u, entry string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u = p.c.url
	if p.paid.Upstream != nil {
		u = messagesURL(p.paid.Upstream)
	}
	return p.paid.Credential, u, p.paid.Entry
}

// again tells the pool what entry answered with status, and reports
// whether the question is to be asked again, on the entry now current.
func (p *paying) again(entry string, status int, h http.Header, body []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	fo := p.paid.Failover
	if fo == nil {
		return false
	}
	if entry != p.paid.Entry {
		// Another question already moved the request on.
		return true
	}
	if !fo.Answered(status, h, body) {
		return false
	}
	next, ok := fo.Next()
	if !ok {
		return false
	}
	p.c.cfg.Logger.Info("decide: the pool entry refused a question; asked again on the next", "entry", entry, "status", status, "next", next.Entry)
	p.paid = next
	return true
}

// answered tells the pool of an answer that is not a refusal.
func (p *paying) answered(entry string, status int, h http.Header) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paid.Failover != nil && entry == p.paid.Entry {
		p.paid.Failover.Answered(status, h, nil)
	}
}

// messagesURL is the Messages URL under base.
func messagesURL(base *url.URL) string {
	u := *base
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/messages"
	u.RawPath, u.RawQuery, u.Fragment, u.User = "", "", "", nil
	return u.String()
}
