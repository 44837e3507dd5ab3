package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Targets, from issue 7.
const (
	targetVsNginx     = 0.9
	targetVsDirect    = 0.5
	targetAddedP50    = 150 * time.Microsecond
	targetAddedP99    = time.Millisecond
	targetTTFE        = time.Millisecond
	targetStreamBytes = 40 << 10
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

func printResults(w io.Writer, results []result, held []streamsResult, nginxNote string, o *options) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tpath\treq/s\tp50\tp99\tfirst event p50\tfirst event p99\tCPU s/10k req\tpeak RSS\terrors\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.cas, r.path, r.rps, us(r.p50), us(r.p99),
			us(r.ttfe50), us(r.ttfe99), cpuText(r), mb(r.peakRSS), r.errors+r.latErrors)
	}
	tw.Flush()
	for _, r := range results {
		if r.firstErr != "" {
			fmt.Fprintf(w, "  %s via %s: first error: %s\n", r.cas, r.path, r.firstErr)
		}
	}

	fmt.Fprintln(w, "\nboxbroker against the others (throughput ratio; latency added over direct at the fixed rate):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tbb/direct req/s\tbb/nginx req/s\tadded p50\tadded p99\tadded first event p50\tnginx added p50\tnginx added p99\t")
	byCase := map[string]map[string]result{}
	var order []string
	for _, r := range results {
		if byCase[r.cas] == nil {
			byCase[r.cas] = map[string]result{}
			order = append(order, r.cas)
		}
		byCase[r.cas][r.path] = r
	}
	for _, c := range order {
		d, bb := byCase[c]["direct"], byCase[c]["boxbroker"]
		ng, hasNginx := byCase[c]["nginx"]
		ngP50, ngP99 := "-", "-"
		if hasNginx && ng.rps > 0 {
			ngP50, ngP99 = signedUS(ng.p50-d.p50), signedUS(ng.p99-d.p99)
		}
		ttfe := "-"
		if bb.ttfe50 > 0 {
			ttfe = signedUS(bb.ttfe50 - d.ttfe50)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, ratio(bb.rps, d.rps), ratio(bb.rps, ng.rps), signedUS(bb.p50-d.p50), signedUS(bb.p99-d.p99), ttfe, ngP50, ngP99)
	}
	tw.Flush()
	if nginxNote != "" {
		fmt.Fprintln(w, "nginx:", nginxNote)
	}
	printFloor(w, order, byCase)

	fmt.Fprintln(w, "\nidle SSE streams held open (a ping every", o.ping.String()+", held", o.hold.String()+"):")
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

	fmt.Fprintln(w, "\ntargets:")
	if r, ok := byCase["small"]; ok {
		d, bb := r["direct"], r["boxbroker"]
		if ng, ok := r["nginx"]; ok && ng.rps > 0 {
			check(w, fmt.Sprintf("small calls: boxbroker/nginx throughput %.2f ≥ %.1f", bb.rps/ng.rps, targetVsNginx), bb.rps/ng.rps >= targetVsNginx)
		}
		if d.rps > 0 {
			check(w, fmt.Sprintf("small calls: boxbroker/direct throughput %.2f ≥ %.1f", bb.rps/d.rps, targetVsDirect), bb.rps/d.rps >= targetVsDirect)
		}
		check(w, fmt.Sprintf("small calls: added p50 %s ≤ %s", signedUS(bb.p50-d.p50), us(targetAddedP50)), bb.p50-d.p50 <= targetAddedP50)
		check(w, fmt.Sprintf("small calls: added p99 %s ≤ %s", signedUS(bb.p99-d.p99), us(targetAddedP99)), bb.p99-d.p99 <= targetAddedP99)
	}
	if r, ok := byCase["sse"]; ok {
		d, bb := r["direct"], r["boxbroker"]
		check(w, fmt.Sprintf("SSE: first event %s after direct's, within %s", signedUS(bb.ttfe50-d.ttfe50), us(targetTTFE)), bb.ttfe50-d.ttfe50 <= targetTTFE)
	}
	for _, h := range held {
		if h.n >= 10000 && h.opened > 0 && h.path != "nginx (HTTP/1.1 upstream)" {
			check(w, fmt.Sprintf("%d idle streams via %s: %.1f KB each < %d KB, %d dropped", h.n, h.path, h.perStream()/1024, targetStreamBytes>>10, h.dropped),
				h.perStream() < targetStreamBytes && h.dropped == 0)
		}
	}
}

// printFloor compares the floor path, where it ran, with the others: how
// much of the distance to nginx is the Go stack's, and how much
// boxbroker's features'.
func printFloor(w io.Writer, order []string, byCase map[string]map[string]result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, c := range order {
		fl, ok := byCase[c]["floor"]
		if !ok {
			continue
		}
		if !header {
			header = true
			fmt.Fprintln(w, "\nthe floor (boxbroker's HTTP server, transport and collector tuning; only nginx's work) against the others:")
			fmt.Fprintln(tw, "case\tfloor/direct req/s\tfloor/nginx req/s\tbb/floor req/s\tfloor added p50\tfloor added p99\tCPU s/10k floor\tbb\tnginx\t")
		}
		d, bb, ng := byCase[c]["direct"], byCase[c]["boxbroker"], byCase[c]["nginx"]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c, ratio(fl.rps, d.rps), ratio(fl.rps, ng.rps), ratio(bb.rps, fl.rps),
			signedUS(fl.p50-d.p50), signedUS(fl.p99-d.p99), cpuText(fl), cpuText(bb), cpuText(ng))
	}
	tw.Flush()
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

func check(w io.Writer, what string, ok bool) {
	mark := "MET   "
	if !ok {
		mark = "MISSED"
	}
	fmt.Fprintf(w, "  %s %s\n", mark, what)
}
