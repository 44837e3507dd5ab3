package egress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestEgress_RemovedBoxIsNotGivenTheNewBoxsSecret: a box removed, and a
// new one added under its name with a secret of the same name pinned to
// its own host, while the broker's memory still admits the removed box's
// token: the new box's request is served with its value, and the
// removed box's, before or after it, is refused naming no value, its
// value nowhere sent (neither read from the store by the box's name nor
// answered from what memory kept for the new box's request).
func TestEgress_RemovedBoxIsNotGivenTheNewBoxsSecret(t *testing.T) {
	for _, newFirst := range []bool{false, true} {
		name := "the removed box first"
		if newFirst {
			name = "the new box first"
		}
		t.Run(name, func(t *testing.T) {
			u := brokertest.NewUnheard(t)
			st := u.Store
			oldHost, newHost := newHost(t, echo), newHost(t, echo)
			br := brokertest.New(t, brokertest.Options{Store: u})
			oldTok := br.AddBox("shop")
			br.SetSecret("shop", secretName, oldHost.URL, "sk_old_"+randomHex(16))
			br.Report(oldTok, brokertest.Entry(protocol.Egress, secretName))

			// The broker's memory holds the box, as after any request of
			// it, and has heard of every change so far.
			ctx := context.Background()
			br.Sync()
			if _, err := br.Server.Cache.BoxByTokenHash(ctx, token.Hash(oldTok)); err != nil {
				t.Fatal(err)
			}
			if _, err := br.Server.Cache.Declaration(ctx, "shop", token.Hash(oldTok)); err != nil {
				t.Fatal(err)
			}
			// Removed and added anew by another process, with its own
			// secret ECHO and its report, which the broker's memory has
			// not heard of.
			u.Deaf.Store(true)
			newTok, err := token.NewBox()
			if err != nil {
				t.Fatal(err)
			}
			newValue := "sk_new_" + randomHex(16)
			sealed, err := br.Server.Keyring.Seal([]byte(newValue), secrets.SecretAD("shop", secretName))
			if err != nil {
				t.Fatal(err)
			}
			if err := st.DeleteBox(ctx, "shop"); err != nil {
				t.Fatal(err)
			}
			if err := st.CreateBox(ctx, store.Box{Name: "shop", TokenHash: token.Hash(newTok), CreatedAt: time.Now(), PayerKind: protocol.PayerShared}); err != nil {
				t.Fatal(err)
			}
			if err := st.SetSecret(ctx, store.Secret{Box: "shop", Name: secretName, Host: newHost.URL, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
			doc, err := json.Marshal(protocol.Declaration{Capabilities: []protocol.Capability{brokertest.Entry(protocol.Egress, secretName)}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.SaveDeclaration(ctx, "shop", token.Hash(newTok), doc, time.Now()); err != nil {
				t.Fatal(err)
			}

			removed := func() {
				t.Helper()
				resp := br.Do("GET", "/egress/"+secretName+"/whoami", oldTok, nil, nil)
				// Admitted from memory, and refused as a box with no
				// such secret (not as a token that is no box's).
				_, msg := brokertest.Refusal(resp.Body)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "holds no value for the secret") {
					t.Errorf("the removed box's request = %d %s, want 403", resp.StatusCode, resp.Body)
				}
			}
			if !newFirst {
				removed()
			}
			resp := br.Do("GET", "/egress/"+secretName+"/whoami", newTok, nil, nil)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the new box's request = %d %s, want 200", resp.StatusCode, resp.Body)
			}
			if newFirst {
				removed()
			}
			u.Deaf.Store(false)

			if n := len(oldHost.Seen()); n != 0 {
				t.Errorf("the removed box's host received %d requests, want none", n)
			}
			seen := newHost.Seen()
			if len(seen) != 1 {
				t.Fatalf("the new box's host received %d requests, want the new box's one", len(seen))
			}
			if got := seen[0].Header.Get("Authorization"); got != "Bearer "+newValue {
				t.Errorf("the new box's request carried %q, want its value", got)
			}
		})
	}
}
