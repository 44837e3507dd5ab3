package capability

import (
	"net/http"
	"strings"
)

// Router is implemented by a capability that names the route a request
// took as a template with no ids or names from the request in it, such as
// "/llm/anthropic/v1/models/{id}". The broker labels metrics and audit rows
// with it; a capability that does not implement Router is labelled with
// its prefix followed by "/*", and so is a request for which Route returns
// "" (as a wrapper does around a capability that names none). Route is
// called only for a request Scopes accepted, and must return one of a
// small, fixed set of strings.
type Router interface {
	Route(r *http.Request) string
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
// egress serves, and what the broker serves on a capability that
// implements no Allower.
const StandardMethods = MethodGet | MethodHead | MethodPost | MethodPut | MethodPatch | MethodDelete | MethodOptions

// MethodOf returns the set holding method alone, or the empty set for a
// method no Methods can hold. Methods are case-sensitive: "get" is not GET.
func MethodOf(method string) Methods {
	switch method {
	case http.MethodGet:
		return MethodGet
	case http.MethodHead:
		return MethodHead
	case http.MethodPost:
		return MethodPost
	case http.MethodPut:
		return MethodPut
	case http.MethodPatch:
		return MethodPatch
	case http.MethodDelete:
		return MethodDelete
	case http.MethodOptions:
		return MethodOptions
	}
	return 0
}

// Has reports whether method is in m.
func (m Methods) Has(method string) bool {
	b := MethodOf(method)
	return b != 0 && m&b != 0
}

// Allow is m as an Allow header lists it, such as "GET, HEAD"; "" for the
// empty set.
func (m Methods) Allow() string {
	var names []string
	for _, name := range [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		if m.Has(name) {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// Allower is implemented by a capability that names the methods each of
// its routes serves. The broker refuses a request in any other method
// with a 405 whose Allow header lists them, before the capability's
// Scopes runs, before the box is authenticated and before anything
// reaches an upstream; a method that is in no Methods is never forwarded,
// stored or logged as it was sent. A capability that does not implement
// Allower is served StandardMethods on every path.
type Allower interface {
	// Allowed returns the methods the route r's path names serves. It
	// reads only r's URL, never its method, header or body. The empty
	// set means the path names no route: the request is a 404.
	Allowed(r *http.Request) Methods
}

// Decoder is implemented by a capability that takes request bodies in a
// content coding. The broker refuses a request body in a content coding
// (a Content-Encoding other than identity) with a 415 on every route of a
// capability that does not implement Decoder, since no scan could read
// the tokens in it, and on a Decoder's routes in any coding it does not
// name; a body in a coding it names is decoded by the broker before Serve
// and goes on as it is, with no Content-Encoding, so that every scan reads
// what the upstream will.
type Decoder interface {
	// Decodes returns the content codings, in lower case, of a request
	// body the capability takes on r's route ("gzip"), and the most bytes
	// such a body may take, encoded or decoded; past it, the request is a
	// 413.
	Decodes(r *http.Request) (codings []string, limit int64)
}
