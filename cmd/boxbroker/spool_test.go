package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
)

// TestCLI_SpoolDead: the batches the store refused for good are shown
// where an operator looks: /readyz (200, degraded, with the count), the
// metric, and `spool dead list` through the admin API and on the data
// directory; `spool dead retry` applies one the store takes now and
// keeps one it refuses again, saying why; `spool dead drop` removes one.
func TestCLI_SpoolDead(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	b.AddBox("alpha")
	const month = "2026-10"
	usage := func(n int64) []store.Usage {
		return []store.Usage{{Box: "alpha", Month: month, PayerKind: "shared", Model: "m", Calls: 1, InputTokens: n}}
	}
	if err := b.Server.Store.Settle(ctx, store.Settlement{Box: "alpha", Month: month, Usage: usage(math.MaxInt64 - 1)}); err != nil {
		t.Fatal(err)
	}
	refused := fmt.Errorf("apply spooled batch: %w: cannot store REAL value in INTEGER column usage.input_tokens (test)", store.ErrRejected)
	takes := outbox.Batch{Key: "aaaa" + outbox.NewKey()[4:], Settle: []store.Settlement{{Box: "alpha", Month: month, Charge: 5}}}
	never := outbox.Batch{Key: "bbbb" + outbox.NewKey()[4:], Settle: []store.Settlement{{Box: "alpha", Month: month, Charge: 7, Usage: usage(2)}}}
	for _, d := range []outbox.Batch{takes, never} {
		if err := b.Server.Spool.SetDead(d, refused); err != nil {
			t.Fatal(err)
		}
	}

	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 || !strings.Contains(string(r.Body), `"deadLetters":2`) ||
		!strings.Contains(string(r.Body), "spool dead list") {
		t.Errorf("readyz with two dead letters = %d %s, want 200 naming them and their count", r.StatusCode, r.Body)
	}
	if r := b.Admin("GET", "/metrics", "", nil); !strings.Contains(string(r.Body), "boxbroker_spool_dead_letters 2") {
		t.Errorf("metrics lack boxbroker_spool_dead_letters 2")
	}

	env := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	code, out, errs := runEnv(t, env, "", "spool", "dead", "list")
	if code != 0 || !strings.Contains(out, takes.Key) || !strings.Contains(out, never.Key) || !strings.Contains(out, "cannot store REAL value") {
		t.Errorf("spool dead list = %d %q %q, want both with the store's reason", code, out, errs)
	}
	code, out, errs = runEnv(t, env, "", "spool", "dead", "retry", "aaaa")
	if code != 0 || !strings.Contains(out, "applied") {
		t.Errorf("spool dead retry (the store takes it) = %d %q %q", code, out, errs)
	}
	if ts, _ := b.Server.Store.Tallies(ctx, "alpha", month); len(ts) != 1 || ts[0].Spent != 5 {
		t.Errorf("tallies after the retry = %+v, want spent 5", ts)
	}
	code, out, errs = runEnv(t, env, "", "spool", "dead", "retry", never.Key)
	if code == 0 || !strings.Contains(errs, "refused the batch again") {
		t.Errorf("spool dead retry (refused again) = %d %q %q, want an error saying so", code, out, errs)
	}

	// On the data directory, without the admin API.
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	code, out, errs = runEnv(t, local, "", "spool", "dead", "list")
	if code != 0 || strings.Contains(out, takes.Key) || !strings.Contains(out, never.Key) {
		t.Errorf("spool dead list --data = %d %q %q, want only the one refused again", code, out, errs)
	}
	if code, _, errs = runEnv(t, local, "", "spool", "dead", "drop", "nosuch", "--yes"); code == 0 {
		t.Errorf("spool dead drop nosuch = 0, want an error (%q)", errs)
	}
	if code, out, errs = runEnv(t, local, "n\n", "spool", "dead", "drop", never.Key); code == 0 || b.Server.Spool.DeadCount() != 1 {
		t.Errorf("spool dead drop answered no = %d %q %q, want not dropped", code, out, errs)
	}
	if code, out, errs = runEnv(t, local, "", "spool", "dead", "drop", "--yes", never.Key); code != 0 || !strings.Contains(out, "dropped") {
		t.Errorf("spool dead drop --yes = %d %q %q", code, out, errs)
	}
	// Dropped through the admin API.
	third := outbox.Batch{Key: outbox.NewKey(), Settle: []store.Settlement{{Box: "alpha", Month: month, Charge: 1}}}
	if err := b.Server.Spool.SetDead(third, refused); err != nil {
		t.Fatal(err)
	}
	if code, out, errs = runEnv(t, env, "", "spool", "dead", "drop", "--yes", third.Key); code != 0 || b.Server.Spool.DeadCount() != 0 {
		t.Errorf("spool dead drop --yes --admin-url = %d %q %q, count %d", code, out, errs, b.Server.Spool.DeadCount())
	}
	if r := b.Do("GET", "/readyz", "", nil, nil); r.StatusCode != 200 || strings.Contains(string(r.Body), "deadLetters") {
		t.Errorf("readyz with none left = %d %s, want 200 naming none", r.StatusCode, r.Body)
	}
}

// TestCLI_SpoolDeadListWithoutTheStore: the dead letters wait in the data
// directory for the store, so `spool dead list` on the directory lists
// them even when the store does not open (here its file is not a
// database), saying so.
func TestCLI_SpoolDeadListWithoutTheStore(t *testing.T) {
	dir := t.TempDir()
	sp, err := outbox.OpenSpool(dir, 1<<20, "test-identity", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := outbox.Batch{Key: outbox.NewKey(), Settle: []store.Settlement{{Box: "alpha", Month: "2026-10", Charge: 5}}}
	if err := sp.SetDead(b, fmt.Errorf("apply spooled batch: %w: refused (test)", store.ErrRejected)); err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, server.DBFile), []byte("this is not a database, and never was one either"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runEnv(t, map[string]string{"BOXBROKER_DATA": dir}, "", "spool", "dead", "list")
	if code != 0 || !strings.Contains(out, b.Key) || !strings.Contains(errs, "the store did not open") {
		t.Errorf("spool dead list with a store that does not open = %d %q %q, want the letter listed and the store's failure said", code, out, errs)
	}
}
