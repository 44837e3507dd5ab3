package capability

import (
	"net/http"
	"strings"
)

// Route is one route a capability serves, declared as data: the broker
// builds a net/http ServeMux of every capability's routes and, for each
// request, finds its route there before anything else is judged. A
// request whose path matches no route of the capability owning its
// prefix is a 404 that reaches no upstream; one in a method its route
// does not list is a 405 whose Allow header lists them, before the box is
// authenticated; a body in a content coding its route does not list is a
// 415.
type Route struct {
	// Pattern is the route's path as a net/http ServeMux pattern, with no
	// method and no host: a literal path ("/decide/v1/systemone"), one
	// with wildcards ("/llm/anthropic/v1/models/{id}",
	// "/egress/{name}/{rest...}"), or a subtree ("/fountain/api/files/").
	// It lies under one of the capability's Prefixes. Wildcards match
	// segments of the request's decoded path, never cleaned first: a
	// capability's Scopes still judges the path in full, and refuses with
	// ok false (a 404) one it does not serve.
	Pattern string
	// Methods are the methods the route serves; a request in any other
	// is a 405. HEAD is served only when listed.
	Methods Methods
	// Label names the route in metrics, log lines and audit rows once
	// Scopes has accepted a request; "" for Pattern. A label holds no
	// ids or names from the request: it is one of a small, fixed set.
	Label string
	// Codings are the content codings, in lower case ("gzip"), of a
	// request body the route takes; none: a body in any coding is a 415.
	// A body in a coding named here is decoded by the broker before Serve
	// and goes on with no Content-Encoding, so that every scan reads what
	// the upstream will.
	Codings []string
	// CodedLimit is the most bytes a body in one of Codings may take,
	// encoded or decoded; past it, the request is a 413.
	CodedLimit int64

	// Tokens, when set, returns the candidate box tokens r carries, for a
	// route whose requests carry the box's token somewhere other than
	// Authorization: Bearer or x-api-key (egress: wherever the API
	// expects its key); the broker accepts the request when exactly one
	// distinct candidate is a box's token. Unset: the token is read from
	// Authorization: Bearer or x-api-key.
	Tokens func(r *http.Request) []string
	// BodyTokens, when set, finds a box's token in r's body, for a route
	// whose upstream APIs may take their key in the body alone (egress:
	// an OAuth token call that sends client_secret in a form). The broker
	// calls it only for a request that did not come through the HTTPS
	// proxy, whose head carries no token at all (Tokens found none), and
	// whose body has a declared length of at most MaxBodyTokenBytes, with
	// the connection's read deadline broker.BodyTimeout ahead. It reads no
	// byte of any other body (of a type whose fields it does not read, or
	// in a content coding); one it reads it puts back, readable from its
	// start. It returns the tokens it found, which Tokens returns from
	// then on as well.
	BodyTokens func(r *http.Request) []string
	// NoToken, when set, is the route's refusal of a request that carries
	// no token, in place of the broker's own 403 (egress: a 401 with
	// WWW-Authenticate, so that git sends its credentials).
	NoToken func(r *http.Request) *Error
	// BodyScopes, when set, returns the scope words r needs, read from
	// its body, which replace Need.Words (feedback's: entries need agent,
	// counts need passive). The broker calls it only for a request Scopes
	// accepted and only once the box's token, read from the head, is a
	// box's: no byte of a body is read for a request that carries no
	// box's token. It may read and replace r.Body, bounded by its own
	// limit; a body over that limit or unreadable is returned as an
	// *Error.
	BodyScopes func(r *http.Request) (words []string, err error)
}

// Under returns the routes of prefix and every path under it, in
// methods, labelled label ("" for prefix followed by "/*"): what a
// capability that judges its paths itself, in Scopes, declares.
func Under(prefix string, methods Methods, label string) []Route {
	if label == "" {
		label = prefix + "/*"
	}
	return []Route{
		{Pattern: prefix, Methods: methods, Label: label},
		{Pattern: prefix + "/", Methods: methods, Label: label},
	}
}

// Methods is a set of the HTTP methods a route serves. Only the methods
// named by its constants can be in one: any other method (TRACE, a
// WebDAV method, or any other token, which HTTP allows to be anything a
// header name may be, a box's own token included) is in none.
type Methods uint8

// The methods a Methods may hold.
const (
	MethodGet Methods = 1 << iota
	MethodHead
	MethodPost
	MethodPut
	MethodPatch
	MethodDelete
	MethodOptions
)

// StandardMethods are the methods HTTP APIs are called with, and all that
// git's smart HTTP (GET, POST), Git LFS (PUT) and the SDKs send: what
// egress serves.
const StandardMethods = MethodGet | MethodHead | MethodPost | MethodPut | MethodPatch | MethodDelete | MethodOptions

// methodNames names each method above at the place of its bit:
// MethodOf(methodNames[i]) is 1<<i.
var methodNames = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions}

// MethodOf returns the set holding method alone, or the empty set for a
// method no Methods can hold. Methods are case-sensitive: "get" is not GET.
func MethodOf(method string) Methods {
	for i, name := range methodNames {
		if name == method {
			return 1 << i
		}
	}
	return 0
}

// Has reports whether method is in m.
func (m Methods) Has(method string) bool {
	return m&MethodOf(method) != 0
}

// Allow is m as an Allow header lists it, such as "GET, HEAD"; "" for the
// empty set.
func (m Methods) Allow() string {
	var names []string
	for i, name := range methodNames {
		if m&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}
