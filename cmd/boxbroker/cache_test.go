package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestCLI_SpendShowsCache: boxbroker spend prints a box's prompt-cache
// use by payer kind and pool entry — hit ratio, reads, writes and
// uncached input, this month and in the last 24 hours — the same read
// from the store and through the admin API, and nothing for a box with
// no calls.
func TestCLI_SpendShowsCache(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("salad")
	b.AddBox("quiet")
	ctx := context.Background()
	now := time.Now().UTC()
	for _, c := range []store.CacheUsage{
		{Box: "salad", PayerKind: "shared", Entry: "default", Calls: 3, InputTokens: 30, CacheReadTokens: 2970},
		{Box: "salad", PayerKind: "shared", Entry: "second", Calls: 1, InputTokens: 10, CacheWriteTokens: 990},
	} {
		c.Hour = now.Truncate(time.Hour)
		if err := b.Server.Store.Settle(ctx, store.Settlement{Box: "salad", Month: spend.Month(now), Cache: []store.CacheUsage{c}}); err != nil {
			t.Fatal(err)
		}
	}
	local := map[string]string{"BOXBROKER_DATA": b.Server.Config.DataDir}
	remote := map[string]string{"BOXBROKER_ADMIN_URL": b.AdminURL, "BOXBROKER_ADMIN_TOKEN": b.AdminToken, "BOXBROKER_DATA": t.TempDir()}
	row := func(cols ...string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + strings.Join(cols, `\s+`) + `\s*$`)
	}
	for name, env := range map[string]map[string]string{"local": local, "remote": remote} {
		code, out, errs := runEnv(t, env, "", "spend", "salad")
		if code != 0 {
			t.Fatalf("%s: spend salad = %d %q", name, code, errs)
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`prompt cache, ` + spend.Month(now) + ` and the last 24 hours`),
			row("PAYER", "ENTRY", "HIT", "CACHE-READ", "CACHE-WRITE", "INPUT", "HIT-24H", "CACHE-READ-24H", "CACHE-WRITE-24H", "INPUT-24H"),
			row("shared", "default", `99\.0%`, "2970", "0", "30", `99\.0%`, "2970", "0", "30"),
			row("shared", "second", `0\.0%`, "0", "990", "10", `0\.0%`, "0", "990", "10"),
			row("total", `74\.2%`, "2970", "990", "40", `74\.2%`, "2970", "990", "40"),
		} {
			if !want.MatchString(out) {
				t.Errorf("%s: spend salad = %q, want a line matching %s", name, out, want)
			}
		}
		code, out, errs = runEnv(t, env, "", "spend", "quiet")
		if code != 0 || strings.Contains(out, "prompt cache") {
			t.Errorf("%s: spend quiet = %d %q %q, want no prompt-cache table", name, code, out, errs)
		}
	}
}
