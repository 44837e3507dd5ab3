// Package capability defines what a capability is to the broker: a value
// with a name, the route prefixes it owns, the routes it serves under them
// (as data: pattern, methods, label, body codings), the scope words each
// request needs, and a handler. The broker holds a table of them (the standard
// inference, decide, egress, feedback and fountain, and any an operator
// adds in Go) and applies the protocol's rule around every one of them, so
// a capability never checks a declaration itself.
package capability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Need is what a request needs before its capability may serve it.
type Need struct {
	// Words are the scope words the request needs, in order; empty for none.
	Words []string
	// Public is true for a request served with no token at all, such as
	// HEAD /llm/anthropic/api/hello.
	Public bool
}

// Capability is one capability the broker serves.
type Capability interface {
	// Name is the capability's name as a box block gives it, such as
	// "inference". Several values may share a name (inference serves both
	// /llm/anthropic and /decide).
	Name() string
	// Prefixes are the route prefixes it owns, such as "/llm/anthropic". A
	// path belongs to a prefix when it equals it or continues with "/".
	Prefixes() []string
	// Routes are the routes it serves under its prefixes, as data (see
	// Route). The broker reads them once, when it is made; a path under a
	// prefix that no route matches is a 404.
	Routes() []Route
	// Scopes returns what r needs, or ok false for a path under its prefix
	// that it does not serve (a 404 that reaches no upstream). It reads
	// only r's head, never its body: the broker calls it before it has
	// authenticated the box. A capability whose words depend on the body
	// declares its routes' BodyScopes as well.
	Scopes(r *http.Request) (need Need, ok bool, err error)
	// Serve handles a request the rule has allowed. It writes the answer
	// itself, or returns an error for the broker to render as a refusal
	// (an *Error keeps its status and message; any other error is a 502
	// whose text is logged, never shown).
	Serve(w http.ResponseWriter, r *http.Request, c *Call) error
}

// MaxBodyTokenBytes bounds a body a route's BodyTokens reads before the
// box is known: no more than net/http itself reads of a body a handler
// leaves unread.
const MaxBodyTokenBytes = 64 << 10

// Call is what the broker tells a capability about an allowed request.
type Call struct {
	// Box is the box whose token the request carries; zero for a Public request.
	Box store.Box
	// Token is the box's token as the request carried it. A capability
	// uses it only to remove or swap it, never to forward it.
	Token string
	// TokenHash is Token's hash (token.Hash), as the box was admitted
	// with it: what a capability reads by the box's name on its behalf
	// is read while the box holds it (store.Store's SecretOfToken).
	TokenHash string
	// TokenInBody reports that the request carried Token in its body
	// alone (see Route.BodyTokens), none in its head.
	TokenInBody bool
	// Words are the scope words the rule allowed.
	Words []string
	// Payer decides who pays for a model call and with which credential;
	// nil on routes that are not model calls.
	Payer PayerFunc
}

// Paid is whose credential pays for one model call, and that credential.
type Paid struct {
	Payer      protocol.Payer
	Credential []byte // the plaintext credential; never logged, never answered
	// Entry names the operator's pool entry Credential is; "" for a
	// credential of the payer's own.
	Entry string
	// Upstream, when not nil, is the Anthropic-compatible base URL the
	// call goes to with Credential, in place of the capability's own.
	Upstream *url.URL
	// Failover, when not nil, is the operator's pool behind a shared
	// payer, to make the call again on another entry after a refusal.
	Failover Failover
}

// Failover is the rest of the operator's pool for one call. Its methods
// are called on the call's goroutine, one at a time.
type Failover interface {
	// Answered tells the pool the status and header the entry last
	// returned by Next (or the Paid's own entry) answered with, and, for
	// a 5xx other than 529, up to the first MaxRefusalBody bytes of its
	// body (nil when the status is not such). It reports whether the
	// answer was a refusal that another entry may not give (a 429, a
	// 529, a 5xx with an overloaded_error, a 401 or 403). It is called
	// once for every answer, so that the pool counts them.
	Answered(status int, h http.Header, body []byte) (refused bool)
	// Next returns the next healthy entry's Paid, or false when none is
	// left or the call has tried for long enough.
	Next() (Paid, bool)
	// Model tells the pool the model the call names, once it is known
	// and before the call is first made: an overload then cools the
	// entry for that model. A call that never tells it ("" too) is
	// cooled as one of an unknown model. The entry of the first try was
	// chosen before the model was known; when, for that model, another
	// entry comes first (the one chosen is overloaded for it, or was
	// passed by for another model's overload), Model returns the Paid to
	// make the first try on instead, and true.
	Model(name string) (Paid, bool)
	// Others reports whether there may be another entry to try: false
	// for a pool of one, so that the call keeps nothing in memory for a
	// try it cannot make.
	Others() bool
}

// MaxRefusalBody bounds what of an upstream's 5xx answer is read to tell
// whether it is an overloaded_error.
const MaxRefusalBody = 64 << 10

// PayerFunc decides who pays for r. It returns ErrNoCredential when the
// payer holds no credential.
type PayerFunc func(ctx context.Context, r *http.Request) (Paid, error)

// ErrNoCredential means no credential is set for the payer.
var ErrNoCredential = errors.New("no credential is set for this payer")

// Error is an error with the status, refusal type and message to show the
// box. Err, when set, is logged and never shown. Header, when set, is
// added to the refusal's answer (WWW-Authenticate, say). Reason is the
// short word the broker's records keep for why the request was refused
// (broker.Record.Reason), one of Reasons, such as ReasonPaused; "" leaves
// it to ReasonOf, which names one by the refusal's type.
type Error struct {
	Status  int
	Type    string
	Message string
	Err     error
	Header  http.Header
	Reason  string
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Owns reports whether path belongs to prefix: it equals it or continues
// with "/".
func Owns(prefix, path string) bool {
	return path == prefix || (len(path) > len(prefix) && path[len(prefix)] == '/' && path[:len(prefix)] == prefix)
}
