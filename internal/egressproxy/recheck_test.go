package egressproxy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
	"github.com/intentius/boxbroker/internal/store"
)

// sickSecrets is a store whose secrets of the boxes named sick… cannot
// be read while fail is set.
type sickSecrets struct {
	store.Secrets
	fail atomic.Bool
}

func (s *sickSecrets) ListSecrets(ctx context.Context, box string) ([]store.Secret, error) {
	if s.fail.Load() && strings.HasPrefix(box, "sick") {
		return nil, errors.New("sick: the store cannot be read")
	}
	return s.Secrets.ListSecrets(ctx, box)
}

// TestProxy_UnreadableBoxKeepsNoOtherTunnelOpen is the fault of a
// re-check that stops at the first group the store cannot be read for:
// the groups after it in that round go unjudged, so a removed box's
// tunnel stays open as long as another box's secrets cannot be read
// and happen to be judged first. With four boxes whose secrets cannot
// be read, a box removed has its tunnel closed by the very next
// re-check, each of five times.
func TestProxy_UnreadableBoxKeepsNoOtherTunnelOpen(t *testing.T) {
	sick := &sickSecrets{}
	f := newFixtureProxy(t, nil, nil, func(pc *egressproxy.Config) {
		pc.Recheck = time.Hour // judged again only by RecheckOnce
		sick.Secrets = pc.Secrets
		pc.Secrets = sick
	})
	for i := range 4 {
		tok := f.b.AddBox(fmt.Sprintf("sick%d", i))
		f.b.Report(tok, brokertest.Entry("egress"))
		openPassthroughFor(t, f, tok)
	}
	sick.fail.Store(true)
	for i := range 5 {
		name := fmt.Sprintf("gone%d", i)
		tok := f.b.AddBox(name)
		f.b.Report(tok, brokertest.Entry("egress"))
		c := openPassthroughFor(t, f, tok)
		if err := f.b.Server.Store.DeleteBox(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		f.b.Sync()
		f.p.RecheckOnce(t.Context())
		if err := waitClosed(c); err != nil {
			t.Fatalf("the tunnel of %s, removed, after one re-check while other boxes' secrets cannot be read: %v, want it closed", name, err)
		}
	}
}
