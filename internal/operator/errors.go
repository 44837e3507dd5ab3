package operator

import (
	"errors"
	"fmt"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Code is the kind of an operator action's refusal; each front end maps
// it once to what it answers (the admin API: a status and a type).
type Code int

// The refusals' codes.
const (
	Invalid         Code = iota + 1 // the request is malformed or names something malformed
	NotFound                        // what it names does not exist
	Conflict                        // what it would make exists already, or cannot be done now
	Forbidden                       // the caller may not do this
	Unauthenticated                 // the caller is not known
	TooLarge                        // the body is over its bound
	Unsupported                     // the body is of a type not taken
	NotImplemented                  // this broker does not serve it
	Unavailable                     // the store does not answer just now
	Upstream                        // a service the broker asked (an identity provider) failed
)

// Error is an operator action's refusal: its Code, the Message the
// operator reads (never a token or a value), and Err, the cause, which is
// logged and never shown.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// CodeOf is the code of the refusal err holds (an *Error in its chain),
// 0 when it holds none. A caller asks it, never the message, what kind of
// refusal an action met: the admin client's errors hold the *Error the
// admin API's status maps back to, so the answer is the same on either
// backend.
func CodeOf(err error) Code {
	var oe *Error
	if errors.As(err, &oe) {
		return oe.Code
	}
	return 0
}

// Errorf is a refusal of code with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// StoreError maps a store error to a refusal: ErrNotFound to NotFound
// with notFound's message, ErrExists to Conflict with exists',
// ErrUnavailable to Unavailable; anything else is returned as it is (an
// internal error). A "" message leaves that sentinel unmapped.
func StoreError(err error, notFound, exists string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound) && notFound != "":
		return Errorf(NotFound, "%s", notFound)
	case errors.Is(err, store.ErrExists) && exists != "":
		return Errorf(Conflict, "%s", exists)
	case errors.Is(err, store.ErrUnavailable):
		// err is logged, never shown.
		return &Error{Code: Unavailable, Message: "The broker cannot read its store just now; try again shortly.", Err: err}
	}
	return err
}

// NoBox is the message for a box that does not exist, whichever front
// end asked: every refusal of a missing box says it, and points to the
// command that lists the boxes.
func NoBox(name string) string {
	return fmt.Sprintf("There is no box named %s; `boxbroker box list` lists the boxes.", name)
}

// CheckBoxName refuses a name that is no box name.
func CheckBoxName(name string) error {
	if !protocol.IsBoxName(name) {
		return Errorf(Invalid, "A box name matches ^[a-z][a-z0-9-]{0,62}$: a lower-case letter, then lower-case letters, digits and hyphens.")
	}
	return nil
}
