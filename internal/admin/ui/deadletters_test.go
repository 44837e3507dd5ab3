package ui_test

import (
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUI_ShowsDeadLetters: the list of boxes says, in one line, how many
// batches of records the store refused for good are set aside on this
// replica, and where to see them; none, no line.
func TestUI_ShowsDeadLetters(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	cookie := signIn(t, b, b.AdminToken)
	if p := visit(t, b, "GET", "/ui/", cookie, nil, nil); strings.Contains(p.body, `id="dead-letters"`) {
		t.Errorf("GET /ui/ with no dead letters shows their line")
	}
	if err := b.Server.Spool.SetDead(outbox.Batch{Settle: []store.Settlement{{Box: "alpha", Charge: 1}}}, store.ErrRejected); err != nil {
		t.Fatal(err)
	}
	p := visit(t, b, "GET", "/ui/", cookie, nil, nil)
	if !strings.Contains(p.body, `id="dead-letters">1 batch of records the store refused is set aside`) || !strings.Contains(p.body, "boxbroker spool dead list") {
		t.Errorf("GET /ui/ with a dead letter lacks its line:\n%s", p.body)
	}
}
