package capability

import "net/http"

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
