package capability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Status is the refusal table: the HTTP status a refusal kept under
// reason (one of Reasons) is answered with. Its error type is the one the
// protocol pairs with the status (protocol.TypeOf). A site whose route
// the protocol answers otherwise says so with Error.At (a token refused
// on the declaration route is a 401, every refusal of decide's body a
// 422). A reason no refusal is made with (token seen, aborted) and any
// word not a reason are a 502.
func Status(reason string) int {
	switch reason {
	case ReasonToken, ReasonDeclaration, ReasonPaused, ReasonBudget, ReasonNoSecret, ReasonNoCredential,
		ReasonConsent, ReasonNotOwn, ReasonRemoved, ReasonRefused, ReasonHost, ReasonPassthrough, ReasonClosed,
		ReasonOutside, ReasonExpired, ReasonRule:
		return http.StatusForbidden
	case ReasonLimit, ReasonRate, ReasonTokenRate, ReasonMintRateLimited:
		return http.StatusTooManyRequests
	case ReasonStore, ReasonCannotRecord, ReasonConfig:
		return http.StatusServiceUnavailable
	case ReasonNoRoute:
		return http.StatusNotFound
	case ReasonMethod:
		return http.StatusMethodNotAllowed
	case ReasonEncoding:
		return http.StatusUnsupportedMediaType
	case ReasonTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonInvalid, ReasonMalformedReport:
		return http.StatusBadRequest
	case ReasonNotSupported:
		return http.StatusNotImplemented
	case ReasonTimeout:
		return http.StatusGatewayTimeout
	case ReasonInternal:
		return http.StatusInternalServerError
	}
	// ReasonUpstreamFailed, ReasonUpstream, ReasonMintRefused,
	// ReasonMintFailed.
	return http.StatusBadGateway
}

// Refuse returns the refusal kept under reason (one of Reasons), with the
// table's status and type (Status) and a formatted message, which is
// shown to the box: it never holds an internal error's text. Every
// refusal a standard capability gives is made with it.
func Refuse(reason, format string, args ...any) *Error {
	status := Status(reason)
	return &Error{Status: status, Type: protocol.TypeOf(status), Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// At answers e with status, and the type the protocol pairs with it,
// in place of its reason's (see Status). It returns e.
func (e *Error) At(status int) *Error {
	e.Status, e.Type = status, protocol.TypeOf(status)
	return e
}

// WithErr sets err as e's Err, the internal error the broker logs and
// never shows. It returns e.
func (e *Error) WithErr(err error) *Error {
	e.Err = err
	return e
}

// LogLevel is the level e's Err is logged at, whichever part of the
// broker meets it: WARN for an upstream's failure (ReasonUpstreamFailed,
// ReasonUpstream, ReasonTimeout: an upstream down, slow, or answering
// what the broker cannot pass on), ERROR for any other, the broker's
// own.
func (e *Error) LogLevel() slog.Level {
	switch e.Reason {
	case ReasonUpstreamFailed, ReasonUpstream, ReasonTimeout:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// Write answers w with e: its Header, its status and its refusal body.
func (e *Error) Write(w http.ResponseWriter) {
	maps.Copy(w.Header(), e.Header)
	protocol.WriteRefusal(w, e.Status, e.Type, e.Message)
}

// Of is err as the refusal the box is shown, in one errors.Is switch:
// the *Error err is or wraps; the store's outage (store.ErrUnavailable)
// as Unavailable; a body over its bound (*http.MaxBytesError) as
// TooLarge; and any other error as a 502 whose text is logged, never
// shown.
func Of(err error) *Error {
	var (
		ce  *Error
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, store.ErrUnavailable):
		return Unavailable(err)
	case errors.As(err, &mbe):
		return TooLarge(mbe.Limit)
	}
	return Refuse(ReasonInternal, "The broker could not complete the request.").At(http.StatusBadGateway).WithErr(err)
}

// The refusals more than one part of the broker gives, each worded once.

// Unavailable is the 503 of a store that did not answer: the store is
// down or slow, and a retry shortly after is likely to be served. err is
// logged, never shown.
func Unavailable(err error) *Error {
	return Refuse(ReasonStore, "The broker cannot read its store just now; try again shortly.").WithErr(err)
}

// NoCredential is the 403 of a model call whose payer pay holds no
// Anthropic credential; hint is the command that sets one
// (payer.SetHint).
func NoCredential(pay protocol.Payer, hint string) *Error {
	return Refuse(ReasonNoCredential, "The broker holds no Anthropic credential for this box's payer (%s); the operator sets one with %s.",
		protocol.FormatPayerHeader(pay), hint)
}

// PayerUnreadable is the 503 of a model call whose payer's credential
// could not be read. err is logged, never shown.
func PayerUnreadable(err error) *Error {
	return Refuse(ReasonStore, "The broker could not read the payer's credential.").WithErr(err)
}

// TooLarge is the 413 of a request body over n bytes.
func TooLarge(n int64) *Error {
	return Refuse(ReasonTooLarge, "The request body is over %d bytes.", n)
}

// UnreadableBody is the 400 of a request body that could not be read to
// its end (the box stopped sending it, say). err is logged, never shown.
func UnreadableBody(err error) *Error {
	return Refuse(ReasonInvalid, "The broker could not read the request body.").WithErr(err)
}

// UnknownToken is the 403 of a request whose token is no box's token at
// this broker: none holds it (an unknown token, or one its box no longer
// holds: removed, or replaced at a rotation with no grace).
func UnknownToken() *Error {
	return Refuse(ReasonToken, "The token is no box's token at this broker.")
}

// BoxReader reads a box as the store holds it now (store.Boxes' Box).
type BoxReader interface {
	Box(ctx context.Context, name string) (store.Box, error)
}

// TokenGone is the 403 of a request of box (the box as the broker
// admitted it) whose box no longer held the token it was admitted with
// when the store wrote on its behalf (a write that checks it answered
// store.ErrNotFound). It reads what boxes holds under box's name now: a
// box enrolled when box was is box, its token replaced (at a rotation
// with no grace), and the request's token is no box's (UnknownToken, as
// the broker refuses it from then on); no box, or one enrolled since (a
// box added under its name), says the box was removed. A read that fails
// says only that the token is no box's, which is so either way.
func TokenGone(ctx context.Context, boxes BoxReader, box store.Box) *Error {
	now, err := boxes.Box(ctx, box.Name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !now.CreatedAt.Equal(box.CreatedAt)) {
		return Refuse(ReasonRemoved, "The box was removed from this broker.")
	}
	return UnknownToken()
}

// Paused is the 403 of a request of box while its owner has it paused.
func Paused(box string) *Error {
	return Refuse(ReasonPaused, "This box is paused by its owner, so the broker serves it nothing until the owner resumes it (`boxbroker box resume %s`).", box)
}

// NotFound is the 404 of a path a capability does not serve.
func NotFound(r *http.Request) *Error {
	return Refuse(ReasonNoRoute, "%s", NotFoundMessage(r.Method, r.URL.Path))
}

// NotFoundMessage is NotFound's message for a request in method for path
// (or, in a record, the route it names).
func NotFoundMessage(method, path string) string {
	return fmt.Sprintf("The broker serves no %s %s.", method, path)
}

// BodyOnBodiless is the refusal of a GET or HEAD request that carries a
// body, or nil for any other request. A capability whose upstream takes
// no such body refuses it rather than forward bytes an upstream may not
// read, which would then stand in front of the next request on its
// connection.
func BodyOnBodiless(r *http.Request) *Error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return nil
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	return Refuse(ReasonInvalid, "A %s request carries no body; this one has one.", r.Method)
}
