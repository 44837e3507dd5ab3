package capability_test

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
)

// TestCut_SeenThroughEveryLayer: the broker's cut is told apart by
// errors.Is alone, with the refusal's reason, however it is wrapped on
// its way to a capability's error handler (a refusal's Err, fmt's %w, a
// transport's *url.Error), and no other error is taken for one, even
// one whose text reads as a cut.
func TestCut_SeenThroughEveryLayer(t *testing.T) {
	cut := capability.CutBy(capability.ReasonPaused)
	for _, err := range []error{
		cut,
		fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", cut),
		&url.Error{Op: "Post", URL: "http://upstream", Err: cut},
		capability.UnreadableBody(fmt.Errorf("read body: %w", cut)),
	} {
		if !errors.Is(err, capability.ErrCut) {
			t.Errorf("errors.Is(%v, ErrCut) is false", err)
		}
		if reason, ok := capability.Cut(err); !ok || reason != capability.ReasonPaused {
			t.Errorf("Cut(%v) = %q, %v; want %q, true", err, reason, ok, capability.ReasonPaused)
		}
	}
	for _, err := range []error{
		nil,
		errors.New(cut.Error()),
		capability.Paused("a"),
		capability.UnreadableBody(errors.New("unexpected EOF")),
	} {
		if _, ok := capability.Cut(err); ok {
			t.Errorf("Cut(%v) is true", err)
		}
	}
	if _, ok := capability.Cut(fmt.Errorf("x: %w", capability.ErrCut)); !ok {
		t.Error("Cut(ErrCut wrapped) is false")
	}
}
