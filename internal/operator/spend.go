package operator

import (
	"context"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// A box's spend and prompt-cache use, as the admin API serves them
// (GET /api/boxes/{name}/spend) and `boxbroker spend` prints them: read
// from the store at each call, never a cache. Money is in US dollars, as
// JSON numbers exact to the micro-dollar (the broker keeps
// micro-dollars).

// ReportedSpend is what a box reported spending: dollars, runs and runs
// it could not price.
type ReportedSpend struct {
	USD      float64 `json:"usd"`
	Runs     int64   `json:"runs"`
	Unpriced int64   `json:"unpriced"`
}

// MeasuredSpend is what the broker measured of some of a month's calls
// beside what it charged for them.
type MeasuredSpend struct {
	// MeasuredUSD is what the broker measured of priced calls whose usage
	// it read whole; Calls counts the calls, Unpriced those of a model
	// with no price, Unmeasured those whose usage was not read whole.
	MeasuredUSD float64 `json:"measuredUsd"`
	Calls       int64   `json:"calls"`
	Unpriced    int64   `json:"unpriced"`
	Unmeasured  int64   `json:"unmeasured"`
	// ChargedUSD is what was charged against budgets: the measured cost,
	// or a call's bound where its cost was not known.
	ChargedUSD float64 `json:"chargedUsd"`
}

// measured is what a spend.Report or spend.Line counts, as a view.
func measured(c spend.Counts) MeasuredSpend {
	return MeasuredSpend{MeasuredUSD: spend.Dollars(c.Measured), Calls: c.Calls, Unpriced: c.Unpriced, Unmeasured: c.Unmeasured, ChargedUSD: spend.Dollars(c.Charged)}
}

// SpendLine is one principal's spend in a month, measured beside
// reported. Principal is null for calls paid with no principal (the
// shared credential) and runs the box reported under none.
type SpendLine struct {
	Principal *string `json:"principal"`
	MeasuredSpend
	// Reported is the box's own figure; null when its report named no
	// such principal for the month.
	Reported *ReportedSpend `json:"reported"`
	// Differs is true when measured and reported differ by more than a
	// cent or 5% (a missing side counting as zero); only ever true when
	// the box reported spend for the month.
	Differs bool `json:"differs"`
}

// UsageCounts is measured usage summed over some of a month's calls, as
// a box's usage lines and the fleet's spend show it: Calls answered,
// Unpriced those of a model with no price, Unmeasured those whose usage
// was not read whole (neither counted in what the calls cost), and the
// tokens the upstream reported.
type UsageCounts struct {
	Calls            int64 `json:"calls"`
	Unpriced         int64 `json:"unpriced"`
	Unmeasured       int64 `json:"unmeasured"`
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheWriteTokens int64 `json:"cacheWriteTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens"`
}

// UsageCountsOf is u's counts, without its cost.
func UsageCountsOf(u store.Usage) UsageCounts {
	return UsageCounts{Calls: u.Calls, Unpriced: u.Unpriced, Unmeasured: u.Unmeasured, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheWriteTokens: u.CacheWriteTokens, CacheReadTokens: u.CacheReadTokens}
}

// UsageView is measured usage by payer kind, principal and model;
// CostUSD is what its priced, measured calls cost.
type UsageView struct {
	Payer     string  `json:"payer"`
	Principal *string `json:"principal"`
	Model     *string `json:"model"`
	UsageCounts
	CostUSD float64 `json:"costUsd"`
}

// SpendReport answers GET /api/boxes/{name}/spend: a box's spend in one
// month as the broker measured it beside what the box reported, by
// principal, differences flagged.
type SpendReport struct {
	Box   string `json:"box"`
	Month string `json:"month"`
	MeasuredSpend
	// Reported is the spend the box's last report carried for Month; null
	// when it carried none for that month. ReportedMonth is the month the
	// carried spend is for (null when none was carried), and ReportedAt
	// when the last report came (null when never).
	Reported      *ReportedSpend `json:"reported"`
	ReportedMonth *string        `json:"reportedMonth"`
	ReportedAt    *string        `json:"reportedAt"`
	// Differs is true when the totals, or any line, differ.
	Differs     bool        `json:"differs"`
	ByPrincipal []SpendLine `json:"byPrincipal"`
	Usage       []UsageView `json:"usage"`
	// Cache is the box's prompt-cache use, by payer kind and pool entry.
	Cache CacheView `json:"cache"`
}

// CacheTokens is prompt-cache use over a span: the calls, and the tokens
// of their prompts read uncached (inputTokens), written to the cache and
// read from it. HitRatio is cacheReadTokens over the three; null when
// there were none.
type CacheTokens struct {
	Calls            int64    `json:"calls"`
	InputTokens      int64    `json:"inputTokens"`
	CacheWriteTokens int64    `json:"cacheWriteTokens"`
	CacheReadTokens  int64    `json:"cacheReadTokens"`
	HitRatio         *float64 `json:"hitRatio"`
}

// CacheLine is the prompt-cache use of one box (named in the fleet's
// report only), payer kind and pool entry (null for calls not paid from
// the operator's pool), in the month and in the last 24 hours.
type CacheLine struct {
	Box     string      `json:"box,omitempty"`
	Payer   string      `json:"payer"`
	Entry   *string     `json:"entry"`
	Month   CacheTokens `json:"month"`
	Last24h CacheTokens `json:"last24h"`
}

// CacheView is the prompt-cache use a spend report carries: the totals in
// the month and in the last 24 hours (the hours from since on, whatever
// the month), and the lines by box, payer kind and entry. A line whose
// last24h ratio is well below its month's is a cache that stopped
// hitting; a new entry's line beside an old one is a box moved to
// another entry of the pool, its cache cold there.
type CacheView struct {
	Since   string      `json:"since"`
	Month   CacheTokens `json:"month"`
	Last24h CacheTokens `json:"last24h"`
	ByEntry []CacheLine `json:"byEntry"`
}

// HitRatio is c's prompt-cache hit ratio (store.CacheUsage.HitRatio), as
// CacheTokens writes it: nil when its calls had no prompt tokens.
func HitRatio(c store.CacheUsage) *float64 {
	if c.CacheReadTokens+c.CacheWriteTokens+c.InputTokens <= 0 {
		return nil
	}
	r := c.HitRatio()
	return &r
}

func cacheTokens(c store.CacheUsage) CacheTokens {
	return CacheTokens{Calls: c.Calls, InputTokens: c.InputTokens, CacheWriteTokens: c.CacheWriteTokens, CacheReadTokens: c.CacheReadTokens, HitRatio: HitRatio(c)}
}

// Month reads a month as the actions take it: YYYY-MM, or "" for this
// month (UTC). Invalid for any other.
func (s *Service) Month(month string) (string, error) {
	if month == "" {
		return spend.Month(s.cfg.Now()), nil
	}
	if spend.Resets(month).IsZero() {
		return "", Errorf(Invalid, "month is written YYYY-MM, such as 2026-10.")
	}
	return month, nil
}

// Spend returns box's spend in month (YYYY-MM; "" for this month, UTC),
// measured beside reported (spend.Compare), with its prompt-cache use.
// Invalid for a bad month, NotFound for no such box.
func (s *Service) Spend(ctx context.Context, box, month string) (SpendReport, error) {
	if err := CheckBoxName(box); err != nil {
		return SpendReport{}, err
	}
	month, err := s.Month(month)
	if err != nil {
		return SpendReport{}, err
	}
	rep, err := spend.Compare(ctx, s.cfg.Store, box, month)
	if err != nil {
		return SpendReport{}, StoreError(err, NoBox(box), "")
	}
	out := SpendReport{Box: rep.Box, Month: rep.Month, MeasuredSpend: measured(rep.Counts), Differs: rep.Differs,
		ReportedMonth: Optional(rep.ReportedMonth), ReportedAt: optionalTime(rep.ReportedAt)}
	if rep.Reported != nil {
		out.Reported = &ReportedSpend{USD: rep.Reported.USD, Runs: rep.Reported.Runs, Unpriced: rep.Reported.Unpriced}
	}
	out.ByPrincipal = views(rep.Lines, func(l spend.Line) SpendLine {
		line := SpendLine{Principal: l.Principal, MeasuredSpend: measured(l.Counts), Differs: l.Differs}
		if l.Reported != nil {
			line.Reported = &ReportedSpend{USD: l.Reported.USD, Runs: l.Reported.Runs, Unpriced: l.Reported.Unpriced}
		}
		return line
	})
	out.Usage = views(rep.Usage, func(u store.Usage) UsageView {
		return UsageView{Payer: u.PayerKind, Principal: Optional(u.Principal), Model: Optional(u.Model),
			UsageCounts: UsageCountsOf(u), CostUSD: spend.Dollars(u.Cost)}
	})
	if out.Cache, err = s.Cache(ctx, box, month); err != nil {
		return SpendReport{}, StoreError(err, "", "")
	}
	return out, nil
}

// Cache returns the prompt-cache use of box (the fleet for "") in month
// (YYYY-MM) and in the last 24 hours (spend.Cache).
func (s *Service) Cache(ctx context.Context, box, month string) (CacheView, error) {
	rep, err := spend.Cache(ctx, s.cfg.Store, box, month, s.cfg.Now())
	if err != nil {
		return CacheView{}, err
	}
	out := CacheView{Since: formatTime(rep.Since), Month: cacheTokens(rep.Total.Month), Last24h: cacheTokens(rep.Total.Day),
		ByEntry: make([]CacheLine, 0, len(rep.Lines))}
	for _, l := range rep.Lines {
		if box != "" {
			l.Box = "" // named by the report
		}
		out.ByEntry = append(out.ByEntry, CacheLine{Box: l.Box, Payer: l.PayerKind, Entry: Optional(l.Entry),
			Month: cacheTokens(l.Month), Last24h: cacheTokens(l.Day)})
	}
	return out, nil
}
