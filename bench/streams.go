package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// streamsResult is what holding n idle streams open through a proxy cost.
type streamsResult struct {
	path     string
	n        int
	opened   int
	dropped  int
	openTime time.Duration
	rssBase  int64 // proxy RSS before any stream was opened
	rssFull  int64 // proxy RSS with every stream open, after the hold
	failed   string
}

func (r streamsResult) perStream() float64 {
	if r.opened == 0 {
		return 0
	}
	return float64(r.rssFull-r.rssBase) / float64(r.opened)
}

// idleBody asks the stand-in for a stream that only pings. The ask is in
// the message's text, which every proxy passes on (Portkey rebuilds the
// body from the fields it knows).
const idleBody = `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Hold this stream open."}]}`

// idleStream is one open stream: its connection and how many reads it has
// seen since the answer's headers.
type idleStream struct {
	conn  net.Conn
	reads atomic.Int64
	ended atomic.Bool
	open  atomic.Bool // the answer began
}

// holdStreams opens n streams through p (at most parallel opening at
// once), holds them for hold, and reports whether every one kept
// receiving pings, and the proxy's memory per stream over base.
func holdStreams(ctx context.Context, p *path, n, parallel int, hold time.Duration, base int64) streamsResult {
	res := streamsResult{path: p.name, n: n, rssBase: base}
	u, err := url.Parse(p.messages())
	if err != nil {
		res.failed = err.Error()
		return res
	}
	keys := p.idleKeys
	if len(keys) == 0 {
		keys = []string{p.key}
	}
	var extra strings.Builder
	for k, vs := range p.header {
		for _, v := range vs {
			fmt.Fprintf(&extra, "%s: %s\r\n", k, v)
		}
	}
	reqs := make([]string, len(keys))
	for i, k := range keys {
		reqs[i] = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nX-Api-Key: %s\r\n%sAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			u.RequestURI(), u.Host, k, extra.String(), len(idleBody), idleBody)
	}

	streams := make([]*idleStream, n)
	var stopping atomic.Bool
	var wg sync.WaitGroup
	var firstErr error
	var firstOnce sync.Once
	fail := func(err error) { firstOnce.Do(func() { firstErr = err }) }
	sem := make(chan struct{}, parallel)
	ready := make(chan bool, n)
	start := time.Now()
	openCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	for i := range streams {
		req := reqs[i%len(reqs)]
		s := &idleStream{}
		streams[i] = s
		sem <- struct{}{}
		if openCtx.Err() != nil {
			<-sem
			ready <- false
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := false
			defer func() {
				if !ok {
					<-sem
					ready <- false
				}
			}()
			d := net.Dialer{Timeout: 10 * time.Second}
			c, err := d.DialContext(openCtx, "tcp", u.Host)
			if err != nil {
				fail(err)
				return
			}
			s.conn = c
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(c, req); err != nil {
				fail(err)
				c.Close()
				return
			}
			br := bufio.NewReaderSize(c, 1024)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				if err == nil {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
				fail(err)
				c.Close()
				return
			}
			buf := make([]byte, 512)
			if _, err := resp.Body.Read(buf); err != nil { // message_start
				fail(fmt.Errorf("first event: %w", err))
				c.Close()
				return
			}
			_ = c.SetDeadline(time.Time{})
			ok = true
			s.open.Store(true)
			<-sem
			ready <- true
			for {
				if _, err := resp.Body.Read(buf); err != nil {
					if !stopping.Load() {
						s.ended.Store(true)
					}
					return
				}
				s.reads.Add(1)
			}
		}()
	}
	for range streams {
		if <-ready {
			res.opened++
		}
	}
	res.openTime = time.Since(start)
	if firstErr != nil {
		res.failed = firstErr.Error()
	}
	// Every open stream must see a ping during the hold, and none may end.
	before := make([]int64, n)
	for i, s := range streams {
		before[i] = s.reads.Load()
	}
	select {
	case <-ctx.Done():
	case <-time.After(hold):
	}
	res.rssFull = p.proc.rss()
	for i, s := range streams {
		if !s.open.Load() {
			continue
		}
		if s.ended.Load() || s.reads.Load() == before[i] {
			res.dropped++
		}
	}
	stopping.Store(true)
	for _, s := range streams {
		if s.conn != nil {
			s.conn.Close()
		}
	}
	wg.Wait()
	res.dropped += n - res.opened
	return res
}
