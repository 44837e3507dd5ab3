package admin

import (
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
)

// refusals is the admin API's one table of refusals: each operator.Code
// with the status and the protocol's error type it answers.
var refusals = map[operator.Code]struct {
	status int
	typ    string
}{
	operator.Invalid:         {http.StatusBadRequest, protocol.TypeInvalid},
	operator.NotFound:        {http.StatusNotFound, protocol.TypeNotFound},
	operator.Conflict:        {http.StatusConflict, protocol.TypeInvalid},
	operator.Forbidden:       {http.StatusForbidden, protocol.TypePermission},
	operator.Unauthenticated: {http.StatusUnauthorized, protocol.TypeAuthn},
	operator.TooLarge:        {http.StatusRequestEntityTooLarge, protocol.TypeTooLarge},
	operator.Unsupported:     {http.StatusUnsupportedMediaType, protocol.TypeInvalid},
	operator.NotImplemented:  {http.StatusNotImplemented, protocol.TypeAPI},
	operator.Unavailable:     {http.StatusServiceUnavailable, protocol.TypeAPI},
	operator.Upstream:        {http.StatusBadGateway, protocol.TypeAPI},
}

// Refusal is how the admin API and the owner's page answer err: an
// *operator.Error its code's status and type with its message; anything
// else a 500 whose text is never shown.
func Refusal(err error) (status int, typ, message string) {
	var oe *operator.Error
	if errors.As(err, &oe) {
		if r, ok := refusals[oe.Code]; ok {
			return r.status, r.typ, oe.Message
		}
	}
	return http.StatusInternalServerError, protocol.TypeAPI, "The broker could not complete the request."
}

// CodeOf is the operator.Code the admin API answers status for (each
// code has its own status), 0 for a status no refusal has: how the admin
// client maps a refusal back to the operator service's.
func CodeOf(status int) operator.Code {
	for code, r := range refusals {
		if r.status == status {
			return code
		}
	}
	return 0
}
