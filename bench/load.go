package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Kinds of case.
const (
	kindMessages = "messages" // a call to the Anthropic Messages API
	kindEgress   = "egress"   // a GET at a third-party API with a secret
)

// benchCase is one kind of request, driven the same way on every path.
type benchCase struct {
	name string
	kind string
	body []byte
	// sse: the answer is a stream of events; the time to the first one
	// is measured.
	sse bool
	// h1: the proxies reach the upstream over HTTP/1.1 (the paths' h1
	// variants), and so does the direct path.
	h1 bool
	// conc is the closed-loop concurrency of the throughput phase; rate
	// the highest open-loop rate (requests/s) of the latency phase, and
	// workers how many requests that phase may have in flight.
	conc    int
	rate    float64
	workers int
}

// result is one path's figures for one case.
type result struct {
	path, cas string
	// throughput phase
	requests int64
	errors   int64
	rps      float64
	cpu10k   float64 // proxy CPU seconds per 10k requests; <0 when not measured
	peakRSS  int64   // proxy peak RSS over both phases; 0 when not measured
	// latency phase, at rate requests/s
	rate           float64
	p50, p99       time.Duration
	ttfe50, ttfe99 time.Duration // SSE: time to the first event
	latErrors      int64
	firstErr       string
	// skipped says why the path did not run the case.
	skipped string
}

// client returns a load-generator client for p: keep-alive, no
// compression, no proxy from the environment, one idle connection per
// worker; over TLS with HTTP/2 where p asks for it.
func client(conns int, p *path) (*http.Client, *http.Transport) {
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		// Under Portkey's keep-alive timeout (5 s), so that the client
		// never sends on a connection the server is closing.
		IdleConnTimeout:    4 * time.Second,
		DisableCompression: true,
		TLSClientConfig:    p.tls,
		ForceAttemptHTTP2:  p.h2,
	}
	return &http.Client{Transport: t, Timeout: 60 * time.Second}, t
}

// sample is one request's outcome.
type sample struct {
	total, ttfe time.Duration
	err         error
}

// copyBufs are the load generator's buffers for reading answers.
var copyBufs copyBuffers

// once sends one request of c on p and reads the whole answer.
func once(ctx context.Context, hc *http.Client, p *path, c *benchCase, events int) sample {
	var req *http.Request
	var err error
	if c.kind == kindEgress {
		req, err = http.NewRequestWithContext(ctx, "GET", p.egressURL, nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+p.egressKey)
			req.Header.Set("Accept", "application/json")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, "POST", p.messages(), bytes.NewReader(c.body))
		if err == nil {
			maps.Copy(req.Header, p.header)
			req.Header.Set("X-Api-Key", p.key)
			req.Header.Set("Anthropic-Version", "2023-06-01")
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if err != nil {
		return sample{err: err}
	}
	return send(hc, req, c, events)
}

// send sends req and reads the whole answer, timing it.
func send(hc *http.Client, req *http.Request, c *benchCase, events int) sample {
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return sample{err: err}
	}
	defer resp.Body.Close()
	const want = http.StatusOK
	buf := copyBufs.Get()
	defer copyBufs.Put(buf)
	var s sample
	if resp.StatusCode != want {
		n, _ := io.ReadFull(resp.Body, buf[:200])
		return sample{err: fmt.Errorf("status %d, want %d: %q", resp.StatusCode, want, buf[:n])}
	}
	if !c.sse {
		if _, err := io.CopyBuffer(io.Discard, resp.Body, buf); err != nil {
			return sample{err: err}
		}
		s.total = time.Since(start)
		return s
	}
	// Count events by their blank-line ends, carrying a trailing newline
	// across reads.
	got, prevNL := 0, false
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && s.ttfe == 0 {
			s.ttfe = time.Since(start)
		}
		for _, b := range buf[:n] {
			if b == '\n' {
				if prevNL {
					got++
				}
				prevNL = true
			} else {
				prevNL = false
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sample{err: err}
		}
	}
	s.total = time.Since(start)
	if got != events {
		return sample{err: fmt.Errorf("stream had %d events, want %d", got, events)}
	}
	return s
}

// throughput drives c on p closed-loop with c.conc workers for d and
// measures the proxy's CPU and peak memory meanwhile.
func throughput(ctx context.Context, p *path, c *benchCase, d, warm time.Duration, events int, r *result) {
	hc, tr := client(c.conc, p)
	defer tr.CloseIdleConnections()
	run := func(d time.Duration) (ok, bad int64, first error) {
		var okN, badN atomic.Int64
		// The first error is kept once: errors differ in type, which an
		// atomic.Value refuses.
		var firstOnce sync.Once
		deadline := time.Now().Add(d)
		var wg sync.WaitGroup
		for i := 0; i < c.conc; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) && ctx.Err() == nil {
					s := once(ctx, hc, p, c, events)
					if s.err != nil {
						badN.Add(1)
						firstOnce.Do(func() { first = s.err })
						continue
					}
					okN.Add(1)
				}
			}()
		}
		wg.Wait()
		return okN.Load(), badN.Load(), first
	}
	run(warm)
	p.proc.resetPeak()
	cpu0 := p.proc.cpu()
	start := time.Now()
	ok, bad, first := run(d)
	el := time.Since(start)
	cpu1 := p.proc.cpu()
	r.requests, r.errors = ok, bad
	r.rps = float64(ok) / el.Seconds()
	r.cpu10k = -1
	if p.proc.pid != 0 && ok > 0 {
		r.cpu10k = (cpu1 - cpu0) / float64(ok) * 10000
	}
	if first != nil {
		r.firstErr = first.Error()
	}
}

// latencyTurn is how long each path drives its open-loop schedule before
// the next path takes its turn, in the latency phase.
const latencyTurn = 500 * time.Millisecond

// latency drives c on every path open-loop at rate, for d on each: each
// request is due at its scheduled time, and one that found every worker
// busy then counts its latency from then, so a slow answer cannot hide
// the requests that queued behind it. The paths take turns of
// latencyTurn, one at a time, so that each sees the same machine: on a
// shared VM the latency of one path moves by hundreds of microseconds
// between phases seconds apart, which would otherwise land on whichever
// path ran then. Each turn begins with one request that is not counted,
// which finds the path's processes idle since its last turn. rs[i] gets
// paths[i]'s figures.
func latency(ctx context.Context, paths []*path, c *benchCase, rate float64, d time.Duration, events int, rs []*result) {
	workers := max(64, c.workers)
	type acc struct {
		hc     *http.Client
		totals []time.Duration
		ttfes  []time.Duration
		bad    int64
	}
	accs := make([]*acc, len(paths))
	for i, p := range paths {
		hc, tr := client(workers, p)
		defer tr.CloseIdleConnections()
		accs[i] = &acc{hc: hc}
	}
	turns := max(1, int(d/latencyTurn))
	perTurn := max(1, int(rate*d.Seconds())/turns)
	step := time.Duration(float64(time.Second) / rate)
	for turn := 0; turn < turns && ctx.Err() == nil; turn++ {
		for i, p := range paths {
			a, r := accs[i], rs[i]
			once(ctx, a.hc, p, c, events) // not counted: see above
			due := make(chan time.Time, perTurn)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for at := range due {
						// A request that waited for a free worker counts
						// from when it was due, so that a slow answer cannot
						// hide those queued behind it; one whose worker was
						// free counts from when it was sent, since the
						// worker's sleep until then oversleeps by up to a
						// millisecond (Go's timers wake from epoll in whole
						// milliseconds), which is the load generator's, not
						// the path's.
						late := time.Since(at)
						if late < 0 {
							late = 0
							time.Sleep(time.Until(at))
						}
						s := once(ctx, a.hc, p, c, events)
						mu.Lock()
						if s.err != nil {
							a.bad++
							if r.firstErr == "" {
								r.firstErr = s.err.Error()
							}
							mu.Unlock()
							continue
						}
						a.totals = append(a.totals, s.total+late)
						if c.sse {
							a.ttfes = append(a.ttfes, s.ttfe+late)
						}
						mu.Unlock()
					}
				}()
			}
			start := time.Now().Add(2 * time.Millisecond)
			for k := 0; k < perTurn && ctx.Err() == nil; k++ {
				due <- start.Add(time.Duration(k) * step)
			}
			close(due)
			wg.Wait()
		}
	}
	for i, a := range accs {
		rs[i].rate = rate
		rs[i].latErrors = a.bad
		rs[i].p50, rs[i].p99 = quantiles(a.totals)
		rs[i].ttfe50, rs[i].ttfe99 = quantiles(a.ttfes)
	}
}

// quantiles returns the 50th and 99th percentiles.
func quantiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.50), at(0.99)
}
