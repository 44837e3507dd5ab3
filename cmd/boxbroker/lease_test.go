package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
)

// TestDurability_KillFreesReservationsWithinTheirLease kills -9 a broker
// while budgeted calls hold reservations (their upstream never answers),
// restarts it, and checks that the reservations are released, not held
// for hours. The bound held: with --reservation-lease 2s, every
// reservation is released by the restarted broker; the test fails only
// if one is still held 30 s (15 leases) after the restart, and logs how
// long the release took.
func TestDurability_KillFreesReservationsWithinTheirLease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real broker")
	}
	if os.Getenv("BOXBROKER_FULL") == "" {
		t.Skip("builds, kills and restarts a real broker (about 10 s): runs with BOXBROKER_FULL=1 (./test.sh's full run, CI)")
	}
	bin, data, env, cli := killableBroker(t)
	tok := cli("", "box", "add", "alpha")
	cli("sk-ant-api03-LEASETEST", "credential", "set", "anthropic")
	cli("", "budget", "set", "alpha", "100")

	const calls = 4
	arrived := make(chan struct{}, calls)
	hold := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // never answers while the broker lives
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(hold) })

	start := func() (*exec.Cmd, string) {
		return serveChild(t, bin, env, "--anthropic-url", up.URL, "--reservation-lease", "2s")
	}
	cmd, url := start()
	post := func(ctx context.Context, path, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	resp, err := post(t.Context(), "/api/box/declaration", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("report = %v %v", resp, err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, err := post(ctx, "/llm/anthropic/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":100,"messages":[]}`); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for range calls {
		<-arrived // each call holds its reservation, at the upstream
	}
	cfg := server.Config{DataDir: data}
	cfg.Defaults()
	st, err := server.OpenStore(context.Background(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	month := spend.Month(time.Now())
	held := func() int64 {
		ts, err := st.Tallies(context.Background(), "alpha", month)
		if err != nil || len(ts) == 0 {
			return -1
		}
		return ts[0].Reserved
	}
	if h := held(); h <= 0 {
		t.Fatalf("reserved with %d calls in flight = %d, want some", calls, h)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cancel()
	wg.Wait()

	cmd, _ = start()
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	restarted := time.Now()
	for held() != 0 {
		if time.Since(restarted) > 30*time.Second {
			t.Fatalf("30 s after the restart, %d micro-dollars are still reserved for calls of a killed broker (lease 2 s)", held())
		}
		time.Sleep(50 * time.Millisecond) // polling the store for a condition
	}
	t.Logf("kill -9 with %d budgeted calls in flight: their reservations were released %s after the restart (lease 2s)",
		calls, time.Since(restarted).Round(10*time.Millisecond))
}
