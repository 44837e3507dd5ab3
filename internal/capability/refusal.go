package capability

import (
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
)

// The refusals more than one part of the broker gives, each worded once.

// Unavailable is the 503 of a store that did not answer: the store is
// down or slow, and a retry shortly after is likely to be served. err is
// logged, never shown. Its Reason is ReasonStore.
func Unavailable(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: protocol.TypeAPI, Reason: ReasonStore,
		Message: "The broker cannot read its store just now; try again shortly.", Err: err}
}

// TooLarge is the 413 of a request body over n bytes.
func TooLarge(n int64) *Error {
	return Refuse(ReasonTooLarge, http.StatusRequestEntityTooLarge, protocol.TypeTooLarge, "The request body is over %d bytes.", n)
}

// UnreadableBody is the 400 of a request body that could not be read to
// its end (the box stopped sending it, say). err is logged, never shown.
func UnreadableBody(err error) *Error {
	return &Error{Status: http.StatusBadRequest, Type: protocol.TypeInvalid, Reason: ReasonInvalid,
		Message: "The broker could not read the request body.", Err: err}
}

// Paused is the 403 of a request of box while its owner has it paused.
// Its Reason is ReasonPaused.
func Paused(box string) *Error {
	return &Error{Status: http.StatusForbidden, Type: protocol.TypePermission, Reason: ReasonPaused,
		Message: fmt.Sprintf("This box is paused by its owner, so the broker serves it nothing until the owner resumes it (`boxbroker box resume %s`).", box)}
}
