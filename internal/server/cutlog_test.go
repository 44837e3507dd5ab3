package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// TestUpload_CutIsTheBoxsRefusal: an upload cut because its box was
// paused as it streamed (rejudge) is the box's refusal, not the
// upstream's failure, through egress and through inference paid from
// the operator's pool: no line at WARN or above tells of a failed
// request or upstream, a line below WARN tells of the cut and names the
// refusal, no upstream call is counted as an upstream error, and no
// pool entry is counted refused, failed over from, cooling or failed.
func TestUpload_CutIsTheBoxsRefusal(t *testing.T) {
	paused := func(b *brokertest.Broker, _ *clock) { pauseBox(t, b, "a") }
	vias := cutVias("big", "upload-cut")
	shared := vias[1].serve
	vias[1].serve = func(b *brokertest.Broker, tok, host string) http.Header {
		// A pool of two entries: the shared credential and one more.
		h := shared(b, tok, host)
		sealed, err := b.Server.Keyring.Seal([]byte("sk-ant-api03-upload-cut-second"), pool.AD("second"))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: "second", Weight: 1, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.Server.Cache.Drop(store.ChangePool, "second")
		return h
	}
	for _, via := range vias {
		t.Run(via.name, func(t *testing.T) {
			var logs syncBuffer
			// A body over what the pool keeps to retry streams upstream
			// as it is read.
			opt := brokertest.Options{Logs: &logs, Config: func(c *server.Config) { c.PoolRetryBody = 1 << 10 }}
			b := uploadCutIn(t, opt, via.path, via.serve, capability.ReasonPaused, paused)

			told := false
			for _, line := range strings.Split(logs.String(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) != nil {
					continue
				}
				msg, _ := m["msg"].(string)
				level, _ := m["level"].(string)
				if (level == "WARN" || level == "ERROR") && strings.Contains(msg, "failed") {
					t.Errorf("the cut is logged as a failure: %s", line)
				}
				if strings.Contains(msg, "cut") && m["refusal"] == capability.ReasonPaused {
					told = true
					if level != "INFO" && level != "DEBUG" {
						t.Errorf("the cut is logged at %s: %s", level, line)
					}
				}
			}
			if !told {
				t.Errorf("no line tells of the cut with its refusal (%s):\n%.4000s", capability.ReasonPaused, logs.String())
			}

			families, err := b.Server.Metrics.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			poolCalls := 0.0
			for _, f := range families {
				for _, m := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range m.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					var v float64
					switch {
					case m.GetCounter() != nil:
						v = m.GetCounter().GetValue()
					case m.GetGauge() != nil:
						v = m.GetGauge().GetValue()
					case m.GetHistogram() != nil:
						v = float64(m.GetHistogram().GetSampleCount())
					}
					switch f.GetName() {
					case "boxbroker_upstream_duration_seconds":
						if labels["status"] == "error" && v > 0 {
							t.Errorf("the cut is counted as %v upstream errors (%v)", v, labels)
						}
					case "boxbroker_pool_requests_total":
						poolCalls += v
					case "boxbroker_pool_refusals_total", "boxbroker_pool_failovers_total":
						if v > 0 {
							t.Errorf("the cut is counted in %s %v: %v", f.GetName(), labels, v)
						}
					case "boxbroker_pool_entry_state":
						if labels["state"] != "healthy" && v > 0 {
							t.Errorf("a pool entry is %s after the cut", labels["state"])
						}
					}
				}
			}
			if via.name == "inference" && poolCalls != 1 {
				t.Errorf("the pool counts %v calls, want the one cut", poolCalls)
			}
		})
	}
}
