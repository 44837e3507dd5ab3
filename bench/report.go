package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Targets, from issue 34: boxbroker's features cost at most a quarter
// of the HTTP stack under them (the floor).
const (
	targetSmallVsFloor   = 0.8
	targetAgentVsFloor   = 0.9
	targetSmallVsPortkey = 15
	targetTTFE           = 200 * time.Microsecond // over the floor's
	targetAddedP50       = 100 * time.Microsecond // over the floor's
	targetStreams        = 10000
	targetStreamBytes    = 48 << 10
)

func us(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// ratio is a/b for the tables, "-" when there is no b (a path absent, or
// that served nothing).
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// cpuText is r's CPU seconds per 10k requests, "-" when it was not
// measured (the direct path, or a path absent from the case).
func cpuText(r result) string {
	if r.cpu10k < 0 || r.requests == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.cpu10k)
}

func signedUS(d time.Duration) string {
	return fmt.Sprintf("%+.0fµs", float64(d)/float64(time.Microsecond))
}

func mb(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MB", float64(b)/(1<<20))
}

// printResults prints the cases' table, the idle streams' table and the
// targets.
func printResults(w io.Writer, results []result, held []streamsResult, notes []string, o *options) {
	byCase := map[string]map[string]result{}
	var order []string
	for _, r := range results {
		if byCase[r.cas] == nil {
			byCase[r.cas] = map[string]result{}
			order = append(order, r.cas)
		}
		byCase[r.cas][r.path] = r
	}
	fmt.Fprintln(w, "Each case: req/s closed-loop (×floor, ×nginx, ×Portkey: the path's req/s over theirs; the floor is a bare httputil.ReverseProxy);")
	fmt.Fprintln(w, "CPU and peak RSS of the proxy's processes;")
	fmt.Fprintln(w, "latency open-loop at the rate shown (the case's rate, or half the slowest proxy's req/s where lower), added = over direct.")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpath\treq/s\t×floor\t×nginx\t×Portkey\tCPU s/10k\tpeak RSS\trate/s\tp50\tp99\tadded p50\tadded p99\tfirst event p50\tadded first event\terrors\t")
	for _, c := range order {
		rs := byCase[c]
		d, fl, ng, pk := rs["direct"], rs["floor"], rs["nginx"], rs["Portkey"]
		for _, r := range results {
			if r.cas != c {
				continue
			}
			if r.skipped != "" {
				fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", r.cas, r.path, r.skipped)
				continue
			}
			added50, added99, addedFE := "-", "-", "-"
			if r.path != "direct" && d.p50 > 0 && r.p50 > 0 {
				added50, added99 = signedUS(r.p50-d.p50), signedUS(r.p99-d.p99)
				if r.ttfe50 > 0 {
					addedFE = signedUS(r.ttfe50 - d.ttfe50)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.cas, r.path, r.rps,
				ratio(r.rps, fl.rps), ratio(r.rps, ng.rps), ratio(r.rps, pk.rps), cpuText(r), mb(r.peakRSS), r.rate,
				us(r.p50), us(r.p99), added50, added99, us(r.ttfe50), addedFE, r.errors+r.latErrors)
		}
	}
	tw.Flush()
	for _, r := range results {
		if r.firstErr != "" {
			fmt.Fprintf(w, "  %s via %s: first error: %s\n", r.cas, r.path, r.firstErr)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}

	if len(held) > 0 {
		fmt.Fprintln(w, "\nidle SSE streams held open (a ping every", o.ping.String()+", held", o.hold.String()+"); boxbroker's upstream is HTTP/2, nginx's and Portkey's HTTP/1.1:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "path\tstreams\topened\tdropped\topen time\tRSS before\tRSS holding\tper stream\t")
		for _, h := range held {
			if h.opened == 0 && h.failed != "" {
				fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\t-\t-\t-\t\n", h.path, h.n)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%.1f KB\t\n", h.path, h.n, h.opened, h.dropped,
				h.openTime.Round(time.Millisecond), mb(h.rssBase), mb(h.rssFull), h.perStream()/1024)
		}
		tw.Flush()
		for _, h := range held {
			if h.failed != "" {
				fmt.Fprintf(w, "  %s, %d streams: %s\n", h.path, h.n, h.failed)
			}
		}
	}

	fmt.Fprintln(w, "\ntargets (boxbroker):")
	bbRatio := func(cas, other string, want float64) {
		r := byCase[cas]
		bb, ok1 := r["boxbroker"]
		x, ok2 := r[other]
		what := fmt.Sprintf("%s calls: boxbroker/%s req/s", cas, other)
		if !ok1 || !ok2 || x.rps <= 0 || x.skipped != "" {
			notRun(w, fmt.Sprintf("%s ≥ %g (no %s figures)", what, want, other))
			return
		}
		check(w, fmt.Sprintf("%s %.2f ≥ %g", what, bb.rps/x.rps, want), bb.rps/x.rps >= want)
	}
	bbRatio("small", "floor", targetSmallVsFloor)
	bbRatio("small-h1", "floor", targetSmallVsFloor)
	bbRatio("agent", "floor", targetAgentVsFloor)
	bbRatio("small", "Portkey", targetSmallVsPortkey)
	if r, ok := byCase["sse"]; ok && r["floor"].ttfe50 > 0 && r["boxbroker"].ttfe50 > 0 {
		fl, bb := r["floor"], r["boxbroker"]
		check(w, fmt.Sprintf("SSE: first event p50 %s after the floor's, within %s", signedUS(bb.ttfe50-fl.ttfe50), us(targetTTFE)), bb.ttfe50-fl.ttfe50 <= targetTTFE)
	} else {
		notRun(w, fmt.Sprintf("SSE: first event within %s of the floor's (no %s figures)", us(targetTTFE),
			lacking(byCase, "sse", func(r result) bool { return r.ttfe50 > 0 })))
	}
	if r, ok := byCase["small"]; ok && r["floor"].p50 > 0 && r["boxbroker"].p50 > 0 {
		fl, bb := r["floor"], r["boxbroker"]
		check(w, fmt.Sprintf("small calls at %.0f/s: p50 %s over the floor's ≤ %s", bb.rate, signedUS(bb.p50-fl.p50), us(targetAddedP50)), bb.p50-fl.p50 <= targetAddedP50)
	} else {
		notRun(w, fmt.Sprintf("small calls: p50 within %s of the floor's (no %s figures)", us(targetAddedP50),
			lacking(byCase, "small", func(r result) bool { return r.p50 > 0 })))
	}
	var most *streamsResult
	for i, h := range held {
		if h.path == "boxbroker" && h.opened > 0 && (most == nil || h.n > most.n) {
			most = &held[i]
		}
	}
	switch {
	case most == nil:
		notRun(w, fmt.Sprintf("%d idle streams at ≤ %d KB each, none dropped (none held)", targetStreams, targetStreamBytes>>10))
	case most.n < targetStreams:
		notRun(w, fmt.Sprintf("%d idle streams at ≤ %d KB each, none dropped (held %d: %.1f KB each, %d dropped)",
			targetStreams, targetStreamBytes>>10, most.n, most.perStream()/1024, most.dropped))
	default:
		check(w, fmt.Sprintf("%d idle streams: %.1f KB each ≤ %d KB, %d dropped", most.n, most.perStream()/1024, targetStreamBytes>>10, most.dropped),
			most.perStream() <= targetStreamBytes && most.dropped == 0)
	}
}

// medianOf merges a path's rounds of one case: the median of each rate
// and percentile, CPU over all the rounds' requests, the highest peak,
// every error.
func medianOf(rs []result) result {
	out := rs[0]
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out.rps = med(func(r result) float64 { return r.rps })
	out.p50 = time.Duration(med(func(r result) float64 { return float64(r.p50) }))
	out.p99 = time.Duration(med(func(r result) float64 { return float64(r.p99) }))
	out.ttfe50 = time.Duration(med(func(r result) float64 { return float64(r.ttfe50) }))
	out.ttfe99 = time.Duration(med(func(r result) float64 { return float64(r.ttfe99) }))
	var cpu, reqs float64
	out.requests, out.errors, out.latErrors = 0, 0, 0
	for _, r := range rs {
		out.requests += r.requests
		out.errors += r.errors
		out.latErrors += r.latErrors
		out.peakRSS = max(out.peakRSS, r.peakRSS)
		if r.cpu10k >= 0 {
			cpu += r.cpu10k * float64(r.requests) / 10000
			reqs += float64(r.requests)
		}
		if out.firstErr == "" {
			out.firstErr = r.firstErr
		}
	}
	out.cpu10k = -1
	if reqs > 0 {
		out.cpu10k = cpu / reqs * 10000
	}
	return out
}

// lacking names what a target comparing boxbroker with the floor on cas
// has no figures of: the case when it did not run, else the first of
// floor and boxbroker whose figure (has) is missing.
func lacking(byCase map[string]map[string]result, cas string, has func(result) bool) string {
	r, ok := byCase[cas]
	if !ok {
		return cas
	}
	for _, p := range []string{"floor", "boxbroker"} {
		if x, ok := r[p]; !ok || x.skipped != "" || !has(x) {
			return p
		}
	}
	return cas
}

func notRun(w io.Writer, what string) {
	fmt.Fprintf(w, "  NOT RUN %s\n", what)
}

func check(w io.Writer, what string, ok bool) {
	mark := "MET    "
	if !ok {
		mark = "MISSED "
	}
	fmt.Fprintf(w, "  %s%s\n", mark, what)
}
