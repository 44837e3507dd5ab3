package main

import (
	"context"
	"math"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// The payer, visitors, grants, budgets, spend and pausing through the
// admin API (--admin-url): the same arguments and output as acting on the
// store, the checks done by the broker.

// micros is dollars from the admin API as micro-dollars.
func micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// runSpendRemote is `spend BOX` through the admin API, printed as from
// the store.
func runSpendRemote(ctx context.Context, c *cli, url, box, month string) error {
	cl, err := c.adminClient(url)
	if err != nil {
		return err
	}
	sr, err := cl.Spend(ctx, box, month)
	if err != nil {
		return remoteError(err)
	}
	printSpend(c, reportOf(sr))
	printCache(c, cacheReportOf(sr.Month, sr.Cache))
	return nil
}

// cacheReportOf is the admin API's prompt-cache use as package spend
// makes it, for printCache.
func cacheReportOf(month string, v admin.CacheView) *spend.CacheReport {
	rep := &spend.CacheReport{Month: month}
	rep.Since, _ = time.Parse(time.RFC3339, v.Since)
	usage := func(t admin.CacheTokens) store.CacheUsage {
		return store.CacheUsage{Calls: t.Calls, InputTokens: t.InputTokens, CacheWriteTokens: t.CacheWriteTokens, CacheReadTokens: t.CacheReadTokens}
	}
	rep.Total = spend.CacheLine{Month: usage(v.Month), Day: usage(v.Last24h)}
	for _, l := range v.ByEntry {
		line := spend.CacheLine{Box: l.Box, PayerKind: l.Payer, Month: usage(l.Month), Day: usage(l.Last24h)}
		if l.Entry != nil {
			line.Entry = *l.Entry
		}
		rep.Lines = append(rep.Lines, line)
	}
	return rep
}

// reportOf is the admin API's spend report as package spend makes it, for
// printSpend.
func reportOf(sr admin.SpendReport) *spend.Report {
	rep := &spend.Report{Box: sr.Box, Month: sr.Month, Measured: micros(sr.MeasuredUSD), Calls: sr.Calls,
		Unpriced: sr.Unpriced, Unmeasured: sr.Unmeasured, Charged: micros(sr.ChargedUSD), Differs: sr.Differs}
	if sr.Reported != nil {
		rep.Reported = &protocol.Spend{Month: sr.Month, USD: sr.Reported.USD, Runs: sr.Reported.Runs, Unpriced: sr.Reported.Unpriced}
	}
	if sr.ReportedMonth != nil {
		rep.ReportedMonth = *sr.ReportedMonth
	}
	if sr.ReportedAt != nil {
		rep.ReportedAt, _ = time.Parse(time.RFC3339, *sr.ReportedAt)
	}
	for _, l := range sr.ByPrincipal {
		line := spend.Line{Principal: l.Principal, Measured: micros(l.MeasuredUSD), Calls: l.Calls, Unpriced: l.Unpriced,
			Unmeasured: l.Unmeasured, Charged: micros(l.ChargedUSD), Differs: l.Differs}
		if l.Reported != nil {
			line.Reported = &protocol.PrincipalSpend{Principal: l.Principal, USD: l.Reported.USD, Runs: l.Reported.Runs, Unpriced: l.Reported.Unpriced}
		}
		rep.Lines = append(rep.Lines, line)
	}
	for _, u := range sr.Usage {
		row := store.Usage{Box: sr.Box, Month: sr.Month, PayerKind: u.Payer, Calls: u.Calls, Unpriced: u.Unpriced, Unmeasured: u.Unmeasured,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheWriteTokens: u.CacheWriteTokens, CacheReadTokens: u.CacheReadTokens,
			Cost: micros(u.CostUSD)}
		if u.Principal != nil {
			row.Principal = *u.Principal
		}
		if u.Model != nil {
			row.Model = *u.Model
		}
		rep.Usage = append(rep.Usage, row)
	}
	return rep
}
