package feedback_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

// droppedTotal is boxbroker_feedback_dropped_total.
func droppedTotal(t *testing.T, br *brokertest.Broker) float64 {
	t.Helper()
	mfs, err := br.Server.Metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "boxbroker_feedback_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("boxbroker_feedback_dropped_total is not registered")
	return 0
}

// dropWarnings are the WARN lines of logs that say a drop, by box.
func dropWarnings(t *testing.T, logs string) map[string][]int {
	t.Helper()
	got := map[string][]int{}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var l struct {
			Level   string `json:"level"`
			Msg     string `json:"msg"`
			Box     string `json:"box"`
			Dropped int    `json:"dropped"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || !strings.Contains(l.Msg, "oldest batches are dropped") {
			continue
		}
		if l.Level != "WARN" {
			t.Errorf("drop logged at %s, want WARN: %s", l.Level, line)
		}
		got[l.Box] = append(got[l.Box], l.Dropped)
	}
	return got
}

// TestFeedback_AConsentingBoxCannotStoreWithoutEnd: a box that sends
// batch after batch keeps only the newest within its bound, of batches
// and of bytes; every POST is still taken (202), each drop is counted and
// said once at WARN naming the box, and another box's batches stay.
func TestFeedback_AConsentingBoxCannotStoreWithoutEnd(t *testing.T) {
	const maxBatches, maxBytes, size = 5, 3000, 1000
	var logs brokertest.Buffer
	br := brokertest.New(t, brokertest.Options{Logs: &logs, Config: func(c *server.Config) {
		c.FeedbackMaxBatches, c.FeedbackMaxBytes = maxBatches, maxBytes
	}})
	toks := map[string]string{}
	for _, name := range []string{"alpha", "beta"} {
		toks[name] = br.AddBox(name)
		br.Report(toks[name], brokertest.Entry("feedback", "agent"))
		setConsent(t, br, name, true)
	}
	beta := postAll(t, br, toks["beta"], 2, 100)

	// 20 small batches: the count bound holds; each one past it drops one.
	ids := postAll(t, br, toks["alpha"], 20, 100)
	if got := keptIDs(t, br, "alpha"); !slices.Equal(got, ids[len(ids)-maxBatches:]) {
		t.Errorf("alpha keeps batches %v after 20, want the newest %d: %v", got, maxBatches, ids[len(ids)-maxBatches:])
	}
	if got := droppedTotal(t, br); got != 20-maxBatches {
		t.Errorf("boxbroker_feedback_dropped_total = %v after 20 batches, want %d", got, 20-maxBatches)
	}
	if w := dropWarnings(t, logs.String()); len(w["alpha"]) != 20-maxBatches || len(w) != 1 {
		t.Errorf("drop WARN lines by box = %v, want %d for alpha, each of one batch", w, 20-maxBatches)
	}

	// Large batches: the byte bound holds, three of 1000 bytes.
	ids = postAll(t, br, toks["alpha"], 10, size)
	if got := keptIDs(t, br, "alpha"); !slices.Equal(got, ids[len(ids)-maxBytes/size:]) {
		t.Errorf("alpha keeps batches %v after 10 of %d bytes, want the newest %d: %v", got, size, maxBytes/size, ids[len(ids)-maxBytes/size:])
	}
	var bytes int
	for _, f := range kept(t, br, "alpha") {
		bytes += len(f.Body)
	}
	if bytes > maxBytes {
		t.Errorf("alpha keeps %d bytes, want at most %d", bytes, maxBytes)
	}
	if got := keptIDs(t, br, "beta"); !slices.Equal(got, beta) {
		t.Errorf("beta keeps %v after alpha's drops, want its own %v", got, beta)
	}
}

// postAll posts n batches of size bytes with the box's token tok, each
// answered 202, and returns their ids.
func postAll(t *testing.T, br *brokertest.Broker, tok string, n, size int) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		resp := br.Do("POST", "/api/feedback", tok, padded(size), nil)
		var a struct {
			Taken bool  `json:"taken"`
			ID    int64 `json:"id"`
		}
		if resp.StatusCode != 202 || json.Unmarshal(resp.Body, &a) != nil || !a.Taken {
			t.Fatalf("POST /api/feedback #%d = %d %s, want 202 taken", i+1, resp.StatusCode, resp.Body)
		}
		ids = append(ids, a.ID)
	}
	return ids
}

// keptIDs are the ids of the batches the store keeps for name.
func keptIDs(t *testing.T, br *brokertest.Broker, name string) []int64 {
	t.Helper()
	var ids []int64
	for _, f := range kept(t, br, name) {
		ids = append(ids, f.ID)
	}
	return ids
}
