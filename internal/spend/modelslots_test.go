package spend_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/spend"
)

// TestSpend_UsageModelSlotsAreTakenOnlyByAnsweredModels: a box names a
// new junk model on each call, and the upstream's answer to each is cut
// off before the broker reads its model, so the request's model stands
// for it in the usage rows. Counted in boxbroker_tokens_total by that
// name, the junk would take every one of the MaxModels named places, and
// the model the box is really answered by would be "other". The junk is
// "other"; the answered model is named.
func TestSpend_UsageModelSlotsAreTakenOnlyByAnsweredModels(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		answer := fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":1}}`, req.Model)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(req.Model, "claude-junk-") {
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, answer[:20])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // cut off: its model never read
		}
		io.WriteString(w, answer)
	})
	b, token := newBroker(t, brokertest.Options{Anthropic: up})
	calls := int64(0)
	for i := range metrics.MaxModels + 5 {
		req, err := http.NewRequest(http.MethodPost, b.URL+"/llm/anthropic/v1/messages", bytes.NewReader(messagesBody(fmt.Sprintf("claude-junk-%d", i), 100, false)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := b.Client.Do(req); err == nil { // the answer is cut off
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		calls++
	}
	if resp := post(b, token, messagesBody("claude-sonnet-4-5", 100, false)); resp.StatusCode != 200 {
		t.Fatalf("POST claude-sonnet-4-5 = %d %s", resp.StatusCode, resp.Body)
	}
	calls++
	brokertest.Usage(t, b.Server.Store, "salad", spend.Month(time.Now()), calls)

	mfs, err := b.Server.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "boxbroker_tokens_total" && mf.GetName() != "boxbroker_spend_usd_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "model" {
					named[lp.GetValue()] = true
				}
			}
		}
	}
	if !named["claude-sonnet-4-5"] {
		t.Errorf("model labels = %v, want claude-sonnet-4-5, the model answered", named)
	}
	for m := range named {
		if strings.HasPrefix(m, "claude-junk-") {
			t.Errorf("model label %q: a model no answer named took a place", m)
		}
	}
}
