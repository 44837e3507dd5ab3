package ui

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"

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

// hourChart draws requests (served) and refusals per hour over the 7 days
// before now, stacked, from hours.
func hourChart(hours []store.HourCount, now time.Time) chart {
	const n = 7 * 24
	end := now.UTC().Truncate(time.Hour)
	start := end.Add(-(n - 1) * time.Hour)
	served := make([]int64, n)
	refused := make([]int64, n)
	var total, refusals, peak int64
	for _, h := range hours {
		i := int(h.Hour.Sub(start) / time.Hour)
		if i < 0 || i >= n {
			continue
		}
		served[i] += h.Requests - h.Refusals
		refused[i] += h.Refusals
		total += h.Requests
		refusals += h.Refusals
		peak = max(peak, served[i]+refused[i])
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="Requests and refusals per hour, last 7 days">`, chartW, chartH)
	plotW, plotH := float64(chartW-chartPadL), float64(chartH-chartPadB)
	axis(&b, peak, plotH)
	bw := plotW / n
	for i := range n {
		x := chartPadL + float64(i)*bw
		if i%24 == 0 {
			day := start.Add(time.Duration(i) * time.Hour)
			fmt.Fprintf(&b, `<line class="grid" x1="%.1f" y1="0" x2="%.1f" y2="%.1f"/><text class="lbl" x="%.1f" y="%d">%s</text>`,
				x, x, plotH, x+2, chartH-4, day.Format("Mon 02"))
		}
		if peak == 0 {
			continue
		}
		hs := plotH * float64(served[i]) / float64(peak)
		hr := plotH * float64(refused[i]) / float64(peak)
		if served[i] > 0 {
			fmt.Fprintf(&b, `<rect class="served" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, plotH-hs, max(bw-0.6, 0.5), hs)
		}
		if refused[i] > 0 {
			fmt.Fprintf(&b, `<rect class="refused" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, plotH-hs-hr, max(bw-0.6, 0.5), hr)
		}
	}
	b.WriteString(`</svg>`)
	return chart{SVG: template.HTML(b.String()),
		Summary: fmt.Sprintf("%d requests, %d of them refused, in the last 7 days (per hour, UTC; refusals in red).", total, refusals)}
}

// axis draws the value axis's top and middle marks for a peak of peak.
func axis(b *strings.Builder, peak int64, plotH float64) {
	fmt.Fprintf(b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartPadL, plotH, chartW, plotH)
	if peak == 0 {
		fmt.Fprintf(b, `<text class="lbl" x="%d" y="%.1f">none</text>`, chartPadL+8, plotH/2)
		return
	}
	fmt.Fprintf(b, `<text class="lbl" x="0" y="10">%d</text><line class="grid" x1="%d" y1="0.5" x2="%d" y2="0.5"/>`, peak, chartPadL, chartW)
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
