package decide

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/proxy"
)

// paying is the credential one decide request's questions are asked on.
// When the operator's pool pays, a question the entry refuses (429, 529,
// a 5xx overloaded_error, 401, 403) moves the request to the pool's next
// healthy entry and is asked again there; questions asked at once share
// the move.
type paying struct {
	c  *Capability
	mu sync.Mutex // guards paid and earlier
	// paid is the entry asked now; its Failover is nil for a payer's own
	// credential.
	paid capability.Paid
	// earlier are the credentials of the entries the request moved on
	// from: the upstream saw them, and could write them in an answer.
	earlier [][]byte
}

// now returns the credential and Messages URL to ask on, the entry's
// name ("" for a payer's own credential), and the credentials of the
// entries the request moved on from, as strings.
func (p *paying) now() (cred []byte, u, entry string, earlier []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u = p.c.url
	if p.paid.Upstream != nil {
		u = messagesURL(p.paid.Upstream)
	}
	for _, c := range p.earlier {
		earlier = append(earlier, string(c))
	}
	return p.paid.Credential, u, p.paid.Entry, earlier
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
	next, ok := nextAsked(fo)
	if !ok {
		return false
	}
	p.c.cfg.Logger.Info("decide: the pool entry refused a question; asked again on the next", "entry", entry, "status", status, "next", next.Entry)
	p.earlier = append(p.earlier, p.paid.Credential)
	p.paid = next
	return true
}

// nextAsked is the pool's next entry decide may ask on: a cloud account
// (Amazon Bedrock, Google Vertex AI) is never sent to the Anthropic API,
// so it is passed over, not failed over onto.
func nextAsked(fo capability.Failover) (capability.Paid, bool) {
	for {
		next, ok := fo.Next()
		if !ok || !cloud.Is(next.Credential) {
			return next, ok
		}
	}
}

// mask returns the model's text with every credential the request was
// asked on so far masked with as many asterisks, as written or
// JSON-escaped: it reaches the box, as a reason or in a refusal that
// names its choice.
func (p *paying) mask(text string) string {
	p.mu.Lock()
	forms := proxy.Masked(append(p.earlier, p.paid.Credential)...)
	p.mu.Unlock()
	text, _ = proxy.RedactString(text, forms)
	return text
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
