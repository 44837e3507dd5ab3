package ui

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// monthStart is the first instant of now's month, UTC: where a box's
// spend picture begins and its budget's tally began.
func monthStart(now time.Time) time.Time {
	y, m, _ := now.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

// dayChart draws a box's measured spend per UTC day of now's month, from
// the cost its audit entries record (days), as a running total: each
// day's bar is what was spent by its end, its top the day's own spend.
// When hasBudget, a dashed line marks the monthly budget limit (both in
// micro-dollars), and the scale reaches it.
func dayChart(days []store.DayCost, hasBudget bool, limit int64, now time.Time) chart {
	start := monthStart(now)
	nd := int(start.AddDate(0, 1, 0).Sub(start) / (24 * time.Hour))
	today := int(now.UTC().Sub(start) / (24 * time.Hour))
	own := make([]int64, nd)
	var total, calls int64
	for _, d := range days {
		i := int(d.Day.Sub(start) / (24 * time.Hour))
		if i < 0 || i >= nd || d.Cost <= 0 {
			continue
		}
		own[i] += d.Cost
		total += d.Cost
		calls += d.Calls
	}
	peak := total
	if hasBudget {
		peak = max(peak, limit)
	}
	var b strings.Builder
	plotH, bw := frame(&b, chartH, "Measured spend per day this month, as a running total, against the budget", peak, spend.FormatUSD(peak), nd)
	var sum int64
	for i := range nd {
		x := chartPadL + float64(i)*bw
		if i%5 == 0 && i < nd-2 { // none so near the end that it is cut off
			tick(&b, x, plotH, chartH-4, start.AddDate(0, 0, i).Format("Jan 02"))
		}
		if peak <= 0 || i > today {
			continue
		}
		hp := plotH * float64(sum) / float64(peak)
		hd := plotH * float64(own[i]) / float64(peak)
		sum += own[i]
		w := max(bw-2, 0.5)
		if sum-own[i] > 0 {
			fmt.Fprintf(&b, `<rect class="prior" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, plotH-hp, w, hp)
		}
		if own[i] > 0 {
			fmt.Fprintf(&b, `<rect class="spent" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, plotH-hp-hd, w, max(hd, 0.5))
		}
	}
	summary := fmt.Sprintf("%s measured over %d priced calls this month (running total per day, UTC; each day's own spend on top)", spend.FormatUSD(total), calls)
	if hasBudget {
		y := plotH - plotH*float64(limit)/float64(peak)
		fmt.Fprintf(&b, `<line class="limit" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartPadL, max(y, 1), chartW, max(y, 1))
		summary += fmt.Sprintf(", against its budget of %s (the dashed line).", spend.FormatUSD(limit))
	} else {
		summary += "; it has no budget of its own."
	}
	b.WriteString(`</svg>`)
	return chart{SVG: template.HTML(b.String()), Summary: summary}
}
