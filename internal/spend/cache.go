package spend

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/store"
)

// CacheLine is the prompt-cache use of one box, payer kind and pool
// entry ("" for calls not paid from the pool): in a month, and in the
// last store.CacheHours hours.
type CacheLine struct {
	Box       string
	PayerKind string
	Entry     string
	Month     store.CacheUsage
	Day       store.CacheUsage
}

// CacheReport is the prompt-cache use of a box, or of the fleet: the
// totals in a month and in the last store.CacheHours hours, and the
// lines they sum, by box, payer kind and entry. A line whose hit ratio
// in the last hours is well below its month's is a cache that stopped
// hitting; a new line beside an old one is a box moved to another entry.
type CacheReport struct {
	Month string
	// Since is the first hour the last hours' figures count.
	Since time.Time
	Total CacheLine
	Lines []CacheLine
}

// Cache builds the CacheReport of box (the fleet for "") for month
// (YYYY-MM) and the store.CacheHours hours up to now.
func Cache(ctx context.Context, st store.PromptCache, box, month string, now time.Time) (*CacheReport, error) {
	since := now.UTC().Truncate(time.Hour).Add(-(store.CacheHours - 1) * time.Hour)
	ms, err := st.ListCache(ctx, box, month)
	if err != nil {
		return nil, err
	}
	ds, err := st.ListCacheSince(ctx, box, since)
	if err != nil {
		return nil, err
	}
	rep := &CacheReport{Month: month, Since: since, Total: CacheLine{Box: box}}
	type key struct{ box, payer, entry string }
	at := map[key]int{}
	line := func(c store.CacheUsage) *CacheLine {
		k := key{c.Box, c.PayerKind, c.Entry}
		i, ok := at[k]
		if !ok {
			i = len(rep.Lines)
			at[k] = i
			rep.Lines = append(rep.Lines, CacheLine{Box: c.Box, PayerKind: c.PayerKind, Entry: c.Entry})
		}
		return &rep.Lines[i]
	}
	for _, c := range ms {
		line(c).Month.Add(c)
		rep.Total.Month.Add(c)
	}
	for _, c := range ds {
		line(c).Day.Add(c)
		rep.Total.Day.Add(c)
	}
	slices.SortFunc(rep.Lines, func(a, b CacheLine) int {
		return cmp.Or(strings.Compare(a.Box, b.Box), strings.Compare(a.PayerKind, b.PayerKind), strings.Compare(a.Entry, b.Entry))
	})
	return rep, nil
}
