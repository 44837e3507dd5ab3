package capability

import (
	"fmt"
	"net/http"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// The reasons a refusal is kept under: the short, stable, lower-case
// word the broker's log line ("refusal"), the audit row (Reason) and the
// metric boxbroker_requests_total{reason} give for why a request was
// refused, so that an operator can count and alert on each. Every
// refusal the broker and its standard capabilities give carries one of
// them; docs/observability.md lists them. A word, once documented, is
// not renamed: dashboards and alerts match on it.
const (
	// ReasonToken: the request carries no box's token (none, an unknown
	// one, or two different ones).
	ReasonToken = "token"
	// ReasonDeclaration: the box's declaration does not list what the
	// request needs (or the broker has none from it yet).
	ReasonDeclaration = "declaration"
	// ReasonPaused: the box's owner has paused it.
	ReasonPaused = "paused"
	// ReasonBudget: the call could pass a monthly budget (the box's, or
	// its principal's on the box), or could cost more than any bound the
	// broker can set while such a budget applies.
	ReasonBudget = "budget"
	// ReasonLimit: the box's rate or concurrency limit (or the proxy's
	// tunnel bound).
	ReasonLimit = "limit"
	// ReasonNoSecret: the box holds no secret (or no value of it) for
	// what the request names, or none is pinned to the proxy's host.
	ReasonNoSecret = "no secret"
	// ReasonNoCredential: the payer of a model call holds no credential.
	ReasonNoCredential = "no credential"
	// ReasonConsent: the broker withholds the box's feedback, as its
	// owner has not consented to its keeping.
	ReasonConsent = "consent"
	// ReasonNotOwn: the request names a resource that is not the box's
	// own (a Fountain id another box made).
	ReasonNotOwn = "not own"
	// ReasonRemoved: the box was removed from the broker while the
	// request was on its way.
	ReasonRemoved = "removed"
	// ReasonStore: the store did not answer in time (a 503 with
	// Retry-After).
	ReasonStore = "store"
	// ReasonCannotRecord: no audit record of the request can be kept.
	ReasonCannotRecord = "cannot record"
	// ReasonConfig: what the broker holds for the request (a secret's
	// host or kind, its sealed value, the capability's setup) is not
	// usable; its owner or operator sets it again.
	ReasonConfig = "config"
	// ReasonNoRoute: a path or method no capability serves (404).
	ReasonNoRoute = "no route"
	// ReasonMethod: a method the route does not serve (405).
	ReasonMethod = "method"
	// ReasonEncoding: a request body in a content coding the route does
	// not take (415).
	ReasonEncoding = "encoding"
	// ReasonTooLarge: a request body (or what the broker must read of
	// it) over its bound.
	ReasonTooLarge = "too large"
	// ReasonInvalid: a request the broker cannot read or forward as it is
	// (a malformed body, path, header or query, a body it could not read).
	ReasonInvalid = "invalid"
	// ReasonMalformedReport: a declaration report the broker cannot take.
	ReasonMalformedReport = "malformed report"
	// ReasonNotSupported: what the request asks is a thing the broker
	// does not do (a protocol upgrade, a feature it does not serve).
	ReasonNotSupported = "not supported"
	// ReasonUpstreamFailed: the upstream could not be reached, or gave no
	// answer.
	ReasonUpstreamFailed = "upstream failed"
	// ReasonUpstream: the upstream answered with something the broker
	// could not use (decide's model gave no answer it can read, say).
	ReasonUpstream = "upstream"
	// ReasonTimeout: the request's time ran out before an answer.
	ReasonTimeout = "timeout"
	// ReasonAborted: the answer was cut off after it began.
	ReasonAborted = "aborted"
	// ReasonInternal: the broker itself could not complete the request
	// (its error is logged, never shown).
	ReasonInternal = "internal"
	// ReasonRefused: a capability an operator adds refused the request
	// and named no reason of its own (ReasonOf's word for a permission
	// refusal without one); no standard capability's refusal is kept
	// under it.
	ReasonRefused = "refused"
	// ReasonHost: a request goes to a host other than its secret's (an
	// egress request sent elsewhere) or its proxy tunnel's (a
	// passthrough tunnel's TLS server name included), or a tunnel to a
	// host approved as unknown would go to an address that is not public.
	ReasonHost = "host"
	// ReasonPassthrough: a passthrough tunnel to a host one of the box's
	// secrets is pinned to.
	ReasonPassthrough = "passthrough"
	// ReasonClosed: a proxy tunnel the broker closed as the box's rule
	// changed.
	ReasonClosed = "closed"
	// ReasonMintRateLimited, ReasonMintRefused and ReasonMintFailed: a
	// token endpoint limited, refused, or failed a mint for a github-app
	// or oauth2 secret.
	ReasonMintRateLimited = "mint-rate-limited"
	// ReasonOutside: a box's token was used from outside the source
	// addresses its owner bound it to (box add --from, box bind): a
	// token that leaves its box is worth nothing.
	ReasonOutside = "outside its box"
	// ReasonExpired: a box's token is past its lifetime (box add --ttl),
	// or is the old token of a rotation whose grace has ended.
	ReasonExpired = "token expired"
	// ReasonTokenSeen is no refusal: an answer from a secret's host or
	// from Fountain held the box's own token, as the box would have
	// sent it, before the broker put the token back in place of a
	// value; the host keeps the token (a pushed .env, say). It is
	// recorded on its own audit row, naming the host.
	ReasonTokenSeen = "token seen"
	// ReasonRule: an egress request no rule of its secret allows
	// (secret set --allow): 403, before anything reaches the host.
	ReasonRule = "outside its rules"
	// ReasonRate: an egress request past its secret's rate for the box
	// (secret set --rate): 429 with Retry-After.
	ReasonRate = "secret rate"
	// ReasonTokenRate: a model call past its box's or principal's
	// token-rate limit (limit set: input or output tokens, or requests,
	// a minute): 429 with Retry-After.
	ReasonTokenRate   = "token rate"
	ReasonMintRefused = "mint-refused"
	ReasonMintFailed  = "mint-failed"
)

// Reasons are every reason above, in the order docs/observability.md
// lists them.
var Reasons = []string{
	ReasonToken, ReasonDeclaration, ReasonPaused, ReasonBudget, ReasonLimit,
	ReasonNoSecret, ReasonNoCredential, ReasonConsent, ReasonNotOwn, ReasonRemoved,
	ReasonStore, ReasonCannotRecord, ReasonConfig,
	ReasonNoRoute, ReasonMethod, ReasonEncoding, ReasonTooLarge, ReasonInvalid,
	ReasonMalformedReport, ReasonNotSupported,
	ReasonUpstreamFailed, ReasonUpstream, ReasonTimeout, ReasonAborted, ReasonInternal, ReasonRefused,
	ReasonHost, ReasonPassthrough, ReasonClosed,
	ReasonMintRateLimited, ReasonMintRefused, ReasonMintFailed,
	ReasonOutside, ReasonExpired, ReasonTokenSeen, ReasonRule, ReasonRate, ReasonTokenRate,
}

// ReasonOf is the reason the broker's records keep for the refusal e:
// its own Reason, or, for an Error made without one (by a capability
// an operator adds), the reason its refusal type names: never an HTTP
// status's text.
func ReasonOf(e *Error) string {
	if e.Reason != "" {
		return e.Reason
	}
	switch e.Type {
	case protocol.TypeAuthn:
		return ReasonToken
	case protocol.TypeNotFound:
		return ReasonNoRoute
	case protocol.TypeTooLarge:
		return ReasonTooLarge
	case protocol.TypeInvalid:
		return ReasonInvalid
	case protocol.TypeRateLimit:
		return ReasonLimit
	case protocol.TypeNotSupported:
		return ReasonNotSupported
	case protocol.TypeTimeout:
		return ReasonTimeout
	}
	if e.Type == protocol.TypePermission || e.Status == http.StatusForbidden {
		return ReasonRefused
	}
	return ReasonInternal
}

// TokenSeen is the audit entry recording that an answer from host (a
// secret's host, or Fountain) to box's request on route held the box's
// own token (ReasonTokenSeen): the host keeps it. It names the host and
// never the token.
func TokenSeen(box, capability, route, method, host string, status int, at time.Time) store.AuditEntry {
	return store.AuditEntry{Box: box, At: at.UTC(), Method: method, Route: route, Capability: capability, Status: status, Reason: ReasonTokenSeen,
		Message: fmt.Sprintf("The answer from %s held this box's own token, as the box sends it: %s keeps a copy (a pushed .env, a logged header). Whoever reads it there holds the box's token: bind the token to the box's addresses (boxbroker box bind) so that it is worth nothing elsewhere, rotate it, and have the copy removed.", host, host)}
}
