package capability

import "errors"

// ErrCut is what every read of a request's body and every write of its
// answer returns, wrapped (CutBy), once the broker has cut the request
// because its box is refused as it is served (paused, removed, its
// token past its expiry or a rotation's grace): the upstream's request
// is broken off, and the box is answered with its refusal by the
// broker. A cut is the box's refusal, never the upstream's failure:
// every layer that meets it (a forwarder's ErrorHandler, a transport, a
// pool) tells it apart with Cut alone, whatever wraps it.
var ErrCut = errors.New("request cut: its box is refused")

// cutError is ErrCut naming the refusal's reason.
type cutError struct{ reason string }

func (e *cutError) Error() string { return ErrCut.Error() + " (" + e.reason + ")" }

func (e *cutError) Is(target error) bool { return target == ErrCut }

// CutBy is the error that cuts a request whose box is refused for reason
// (one of Reasons): errors.Is(err, ErrCut) holds for it.
func CutBy(reason string) error { return &cutError{reason: reason} }

// Cut reports whether err is, or wraps, the broker's cut of its request
// (ErrCut), and the reason its box was refused ("" when the cut names
// none). It is the one test of a cut: an error it reports is the box's
// refusal, to be logged as such (at most at Info) and counted as the
// broker's refusal, never as the upstream's failure.
func Cut(err error) (reason string, ok bool) {
	if !errors.Is(err, ErrCut) {
		return "", false
	}
	var ce *cutError
	if errors.As(err, &ce) {
		return ce.reason, true
	}
	return "", true
}
