package spend_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// echoModelStandIn answers every Messages call with usage, naming as its
// model what the request named, as the Anthropic API names the model it
// served.
func echoModelStandIn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		ans, _ := json.Marshal(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Model,
			"content": []map[string]any{{"type": "text", "text": "hi"}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(ans)
	})
}

// TestSettle_BoxsModelNameMakesNoSettlementTheStoreRefuses: a hostile
// box names as its model a string holding a NUL ("\u0000" in its JSON),
// or one whose 200th byte falls inside a character (the usage row keeps
// 200 bytes of it), and the upstream names the model it was asked for.
// PostgreSQL refuses both in text for good: the call's settlement — its
// charge, its usage, its reservation's release — was set aside as a dead
// letter, and the box's budget never saw the call. The bound held: the
// model kept is valid UTF-8 with no NUL, at most 200 bytes, every call is
// charged in the store, and nothing is spooled or set aside. Run on
// SQLite and, where one can be had, PostgreSQL; bounded by a 10 s wait
// for the settlements.
func TestSettle_BoxsModelNameMakesNoSettlementTheStoreRefuses(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(*testing.T) store.Store { return nil }},
		{"postgres", func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), postgrestest.Schema(t))
			if err != nil {
				t.Fatalf("postgres.Open = %v", err)
			}
			return st
		}},
	}
	models := []string{
		"claude-haiku-4-5\x00",
		strings.Repeat("m", 199) + "é", // 201 bytes: the 200th is é's first
	}
	for _, sto := range stores {
		t.Run(sto.name, func(t *testing.T) {
			b, token := newBroker(t, brokertest.Options{Anthropic: echoModelStandIn(), Store: sto.open(t)})
			setBudget(t, b.Server.Store, 1_000_000_000)
			b.Sync()
			for _, model := range models {
				if r := post(b, token, messagesBody(model, 100, false)); r.StatusCode != 200 {
					t.Fatalf("model %q = %d %s, want 200", model, r.StatusCode, r.Body)
				}
			}
			month := spend.Month(time.Now())
			var u []store.Usage
			for deadline := time.Now().Add(10 * time.Second); ; {
				var err error
				if u, err = b.Server.Store.ListUsage(context.Background(), "salad", month); err != nil {
					t.Fatal(err)
				}
				calls := int64(0)
				for _, x := range u {
					calls += x.Calls
				}
				if calls == int64(len(models)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("ListUsage = %+v after 10 s, want %d calls kept (spool %d bytes, %d dead letters)",
						u, len(models), b.Server.Spool.Size(), b.Server.Spool.DeadCount())
				}
				time.Sleep(10 * time.Millisecond)
			}
			for _, x := range u {
				if !utf8.ValidString(x.Model) || strings.IndexByte(x.Model, 0) >= 0 || len(x.Model) > 200 {
					t.Errorf("usage row's model = %q, want valid UTF-8 with no NUL, at most 200 bytes", x.Model)
				}
			}
			if spent := boxSpent(settled(t, b.Server.Store, "salad", month)); spent <= 0 {
				t.Errorf("box spent %d, want both calls charged", spent)
			}
			if n, d := b.Server.Spool.Size(), b.Server.Spool.DeadCount(); n != 0 || d != 0 {
				t.Errorf("spool %d bytes, %d dead letters; want none", n, d)
			}
		})
	}
}
