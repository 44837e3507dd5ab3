package inference_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestInference_RemovedBoxIsNotPaidByTheNewOwner: a box paid by its
// owner is removed, and a new one added under its name whose owner sets
// a key of their own, while the broker's memory still admits the removed
// box's token: the removed box's model call is not paid with the new
// owner's key, which no upstream receives: it is refused 403 as one of
// a payer with no credential.
func TestInference_RemovedBoxIsNotPaidByTheNewOwner(t *testing.T) {
	u := brokertest.NewUnheard(t)
	st := u.Store
	b := brokertest.New(t, brokertest.Options{Store: u})
	ctx := context.Background()
	old := b.AddBox("alpha")
	ob, err := st.Box(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	ob.PayerKind = protocol.PayerOwner
	if err := st.UpdateBox(ctx, ob); err != nil {
		t.Fatal(err)
	}
	b.SetCredential(payer.OwnerAnthropic("alpha"), apiKey+"-OLD-OWNER")
	b.Report(old, brokertest.Entry("inference", "agent"))
	// The broker's memory holds the box and its report, as after any
	// request of it, and has heard of every change so far.
	b.Sync()
	if _, err := b.Server.Cache.BoxByTokenHash(ctx, token.Hash(old)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Server.Cache.Declaration(ctx, "alpha", token.Hash(old)); err != nil {
		t.Fatal(err)
	}
	// Removed and added anew by another process, the new box's owner
	// setting their key, none of which the broker's memory has heard of.
	u.Deaf.Store(true)
	if err := st.DeleteBox(ctx, "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBox(ctx, store.Box{Name: "alpha", TokenHash: "the new box's token hash", CreatedAt: time.Now(), PayerKind: protocol.PayerOwner}); err != nil {
		t.Fatal(err)
	}
	b.SetCredential(payer.OwnerAnthropic("alpha"), apiKey+"-NEW-OWNER")

	resp := b.Do("POST", "/llm/anthropic/v1/messages", old, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`), http.Header{"Anthropic-Version": {"2023-06-01"}})
	for _, s := range b.Upstream.Seen() {
		if strings.Contains(s.Header.Get("X-Api-Key")+s.Header.Get("Authorization"), "NEW-OWNER") {
			t.Errorf("the removed box's call reached the upstream with the new box's owner's key")
		}
	}
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("the removed box's call = %d %s, want 403 as paid by no credential", resp.StatusCode, resp.Body)
	}
}
