package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
)

func TestLogger_BuffersInfoAndWritesWarningsAtOnce(t *testing.T) {
	var out brokertest.Buffer
	log, flush := server.NewLogger(&out, "info")
	log.Info("request", "status", 200)
	if got := out.String(); got != "" {
		t.Fatalf("an INFO line was written at once: %q", got)
	}
	log.Warn("upstream failed", "status", 502)
	got := out.String()
	if !strings.Contains(got, `"msg":"request"`) || !strings.Contains(got, `"msg":"upstream failed"`) || strings.Index(got, "request") > strings.Index(got, "upstream failed") {
		t.Fatalf("after a WARN, the log holds %q; want both lines, in order", got)
	}
	log.With("box", "a").Info("later")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), `"msg":"later"`) {
		if time.Now().After(deadline) {
			t.Fatalf("an INFO line was not written out within %v", server.LogFlushEvery)
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Debug("hidden")
	log.Info("last")
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, `"msg":"last"`) || strings.Contains(got, "hidden") {
		t.Fatalf("after flush the log holds %q", got)
	}
	_ = slog.LevelInfo
}
