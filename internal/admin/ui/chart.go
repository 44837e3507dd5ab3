package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// The owner's page's pictures: SVG written here, inline in the page, so
// that the Content-Security-Policy stays as it is (no image, script or
// inline style: the colours are classes in style.css). Only numbers and
// fixed words go into the SVG; labels pass through template escaping.

// chart is one picture and the words that say what it shows.
type chart struct {
	SVG     template.HTML
	Summary string
}

// Chart geometry, in SVG user units.
const (
	chartW    = 840
	chartH    = 140
	chartPadL = 44
	chartPadB = 18
)

// hourChartH is the hourly chart's height: a strip, so that above the
// list of boxes it leaves the table on the first screen.
const hourChartH = 72

// hourChart draws requests per hour over the 7 days before now, from
// hours, stacked: served, the upstream's failures (amber) and the
// broker's refusals (red).
func hourChart(hours []store.HourCount, now time.Time) chart {
	const n = 7 * 24
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-(n - 1) * time.Hour)
	served := make([]int64, n)
	failed := make([]int64, n)
	refused := make([]int64, n)
	var total, refusals, failures, peak int64
	for _, h := range hours {
		i := int(h.Hour.Sub(start) / time.Hour)
		if i < 0 || i >= n {
			continue
		}
		served[i] += h.Requests - h.Refusals - h.Upstream
		failed[i] += h.Upstream
		refused[i] += h.Refusals
		total += h.Requests
		refusals += h.Refusals
		failures += h.Upstream
		peak = max(peak, served[i]+failed[i]+refused[i])
	}
	var b strings.Builder
	plotH, bw := frame(&b, hourChartH, "Requests, upstream failures and refusals per hour, last 7 days", peak, strconv.FormatInt(peak, 10), n)
	for i := range n {
		x := chartPadL + float64(i)*bw
		if i%24 == 0 {
			tick(&b, x, plotH, hourChartH-4, start.Add(time.Duration(i)*time.Hour).Format("Mon 02"))
		}
		if peak == 0 {
			continue
		}
		y := plotH
		for _, bar := range []struct {
			class string
			n     int64
		}{{"served", served[i]}, {"failed", failed[i]}, {"refused", refused[i]}} {
			if bar.n <= 0 {
				continue
			}
			h := plotH * float64(bar.n) / float64(peak)
			y -= h
			fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, bar.class, x, y, max(bw-0.6, 0.5), h)
		}
	}
	b.WriteString(`</svg>`)
	return chart{SVG: template.HTML(b.String()),
		Summary: fmt.Sprintf("%d requests, %d refused by the broker (red), %d failed upstream (amber), in the last 7 days (per hour, UTC).", total, refusals, failures)}
}

// frame opens a picture h high, named label, and draws its value axis
// and the axis's top mark, written top, for a peak of peak ("none" for
// none); it returns the plot's height and the width of each of n bars.
func frame(b *strings.Builder, h int, label string, peak int64, top string, n int) (plotH, bw float64) {
	fmt.Fprintf(b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, h, label)
	plotH = float64(h - chartPadB)
	fmt.Fprintf(b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartPadL, plotH, chartW, plotH)
	if peak <= 0 {
		fmt.Fprintf(b, `<text class="lbl" x="%d" y="%.1f">none</text>`, chartPadL+8, plotH/2)
	} else {
		fmt.Fprintf(b, `<text class="lbl" x="0" y="10">%s</text><line class="grid" x1="%d" y1="0.5" x2="%d" y2="0.5"/>`, template.HTMLEscapeString(top), chartPadL, chartW)
	}
	return plotH, float64(chartW-chartPadL) / float64(n)
}

// tick draws the time axis's mark at x, written label at the foot, y.
func tick(b *strings.Builder, x, plotH float64, y int, label string) {
	fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="0" x2="%.1f" y2="%.1f"/><text class="lbl" x="%.1f" y="%d">%s</text>`, x, x, plotH, x+2, y, label)
}

// hourSettle is how long after an hour ends its counts are taken as
// final: the audit writer batches entries, so the last of an hour may
// reach the store a little after it ends.
const hourSettle = 5 * time.Minute

// hourCache keeps the whole broker's requests and refusals of the hours
// that have ended (and settled), which do not change, so that drawing
// the list page's chart reads only the audit entries since the last
// settled hour rather than 7 days of every box's.
type hourCache struct {
	mu   sync.Mutex // guards done and upTo
	done map[time.Time]store.HourCount
	// upTo is the end of the hours held: every hour before it, back to
	// the chart's start, is in done (those with no entries absent).
	upTo time.Time
}

// brokerHours returns the whole broker's hours since since, reading the
// store only from the first hour not settled before now.
func (u *Page) brokerHours(ctx context.Context, since, now time.Time) ([]store.HourCount, error) {
	c := &u.hours
	c.mu.Lock()
	defer c.mu.Unlock()
	settled := now.Add(-hourSettle).UTC().Truncate(time.Hour)
	from := since
	if c.done != nil && !c.upTo.Before(since) && !c.upTo.After(settled) {
		from = c.upTo
	} else {
		c.done = map[time.Time]store.HourCount{}
	}
	fresh, err := u.cfg.Store.AuditHours(ctx, "", from)
	if err != nil {
		return nil, err
	}
	var out []store.HourCount
	for h, n := range c.done {
		if h.Before(since) {
			delete(c.done, h)
			continue
		}
		out = append(out, n)
	}
	for _, h := range fresh {
		if h.Hour.Before(settled) {
			c.done[h.Hour] = h
		}
		out = append(out, h)
	}
	c.upTo = settled
	return out, nil
}

// failure says, for an audit entry the upstream failed rather than the
// broker refused (store.IsUpstreamFailure), what failed, in words an
// owner reads beside the broker's refusals: the entry's own message when
// it has one. It returns "" for any other entry. upstream is the
// upstream's status: an int, a *int (nil for none) or nil.
func failure(reason, message string, upstream any) string {
	status := 0
	switch v := upstream.(type) {
	case int:
		status = v
	case *int:
		if v != nil {
			status = *v
		}
	}
	if !store.IsUpstreamFailure(reason, status) {
		return ""
	}
	var what string
	switch reason {
	case store.ReasonUpstreamFailed:
		what = "Upstream failed: it could not be reached, or gave no answer."
	case store.ReasonUpstreamUnusable:
		what = "Upstream failed: its answer could not be used."
	default:
		what = fmt.Sprintf("Upstream failed: it answered %d", status)
		if text := http.StatusText(status); text != "" {
			what += " (" + text + ")"
		} else if status == 529 {
			what += " (overloaded)"
		}
		what += ", passed on to the box as it came."
	}
	if message != "" {
		what += " " + message
	}
	return what
}

// budgetGauge is how a budget's bar is drawn. Its scale reaches to what
// was used (spent and held) when that is past the limit, so an overspent
// budget is drawn past the bar's high mark (the bad region), never as a
// full bar in the good one; Over says so, and OverBy by how much.
type budgetGauge struct {
	Max, Low, High, Value float64
	Over                  bool
	OverBy                float64
}

// gauge is the budgetGauge of b: good below four-fifths of the limit,
// near it above, bad past it.
func gauge(b operator.BudgetView) budgetGauge {
	used := b.Spent + b.Held
	g := budgetGauge{Max: max(b.USD, used), Low: 0.8 * b.USD, High: b.USD, Value: used}
	if used > b.USD {
		g.Over, g.OverBy = true, used-b.USD
	}
	return g
}
