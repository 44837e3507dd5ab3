package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/intentius/boxbroker/internal/filelock"
	"github.com/intentius/boxbroker/internal/hold"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// readyFile is the file the readiness check writes, syncs and removes in
// the data directory, to learn that the disk takes writes.
const readyFile = ".readyz"

// Ready reports whether this replica should be sent requests, and what
// it found: that the store answers a ping within StoreDeadline, and
// that the data directory takes a synced write (the spool's disk, and
// SQLite's) within the bound of a write made beside requests (five times
// StoreDeadline, at least a second: an fsync on a busy disk can take a
// few hundred ms). The checks run at once, so Ready answers within that
// bound, and a little more, whatever the store or the disk does. Checks
// asked for at the same time share one ping and one write, and a write
// that succeeded stands for diskOKFor (see diskProbe).
//
// Beside them it reports, from memory: a SQLite database file found gone
// (store_file, not ready), and this replica's clock's skew from the
// store's past spend.MaxClockSkew (clock; still ready, as leases are
// judged by the store's clock).
//
// From the moment Serve begins to stop (Draining), Ready answers not
// ready at once, checking nothing: a load balancer sends no more
// requests to a replica that is going away.
func (s *Server) Ready(ctx context.Context) (map[string]any, bool) {
	if s.Draining() {
		return map[string]any{"ready": false, "draining": true}, false
	}
	d := writeBound(s.Config.StoreDeadline)
	storeErr := make(chan error, 1)
	go func() { storeErr <- s.pingShared(ctx) }()
	diskErr := make(chan error, 1)
	go func() { diskErr <- s.disk.writable(ctx, d, s.Config.DataDir) }()
	writesErr := make(chan error, 1)
	go func() { writesErr <- s.storeWrites.check(deadline.Within(ctx, d), s.bound, s.Store) }()
	out := map[string]any{"ready": true, "store": "ok", "disk": "ok"}
	ok := true
	if err := <-storeErr; err != nil {
		out["store"], ok = "unavailable", false
	}
	if err := <-diskErr; err != nil {
		out["disk"], ok = "cannot write", false
		s.log.Warn("readyz: the data directory takes no write", "dir", s.Config.DataDir, "err", err)
	}
	if err := s.storeFile.Err(); err != nil {
		out["store_file"], ok = "gone: the database file was removed or replaced", false
	}
	if skew, measured := s.Meter.ClockSkew(); measured && (skew > spend.MaxClockSkew || skew < -spend.MaxClockSkew) {
		out["clock"] = clockSkew(skew) // shown; leases hold by the store's clock
	}
	if err := <-writesErr; err != nil {
		out["storeWrites"], ok = "failing: "+err.Error(), false
	}
	readyDeadLetters(out, s.Outbox.Spool.DeadCount())
	if err := s.Outbox.Err(); err != nil {
		out["record"] = "cannot record"
		ok = ok && s.Config.AuditOptional // availability chosen: still ready
	}
	out["ready"] = ok
	return out, ok
}

// clockSkew says how far this replica's clock is from the store's.
func clockSkew(d time.Duration) string {
	if d < 0 {
		return (-d).Round(time.Second).String() + " behind the store's"
	}
	return d.Round(time.Second).String() + " ahead of the store's"
}

// ping pings the store within the request path's bound, whoever asks
// (the admin API's calls are otherwise not bounded).
func (s *Server) ping(ctx context.Context) error {
	return s.Store.Ping(deadline.Within(ctx, s.bound.Deadline()))
}

// bounded runs f and returns its error, or an error once d has passed
// (f then finishes on its own).
func bounded(ctx context.Context, d time.Duration, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return fmt.Errorf("no answer within %s", d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// diskOKFor is how long a data directory that took a synced write counts
// as writable without another: /readyz is served to anyone on the
// box-facing listener, and unauthenticated on the admin one (a page the
// operator visits can ask it), and a flood of it must not become a flood
// of fsyncs.
const diskOKFor = time.Second

// diskProbe is the readiness check's write to the data directory: one at
// a time, whoever asks (callers that ask meanwhile share its result), and
// none again for diskOKFor after one that succeeded. A failure is not
// kept: the next check writes again.
type diskProbe struct {
	write   func(dir string) error // writable, unless a test sets it
	sf      singleflight.Group
	mu      sync.Mutex
	okUntil time.Time
}

func (p *diskProbe) writable(ctx context.Context, d time.Duration, dir string) error {
	p.mu.Lock()
	fresh := time.Now().Before(p.okUntil)
	p.mu.Unlock()
	if fresh {
		return nil
	}
	_, err := hold.Shared(ctx, &p.sf, "disk", func() (any, error) {
		write := p.write
		if write == nil {
			write = writable
		}
		err := bounded(context.WithoutCancel(ctx), d, func() error { return write(dir) })
		if err == nil {
			p.mu.Lock()
			p.okUntil = time.Now().Add(diskOKFor)
			p.mu.Unlock()
		}
		return nil, err
	})
	return err
}

// pingShared is the readiness check's ping of the store: one at a time,
// whoever asks (callers that ask meanwhile share its answer), so that a
// flood of /readyz holds one of the store's connections at most, never
// those boxes' calls need. No answer is kept: a store that fails, or is
// closed, turns the next check not ready.
func (s *Server) pingShared(ctx context.Context) error {
	_, err := hold.Shared(ctx, &s.pinging, "ping", func() (any, error) {
		return nil, s.ping(context.WithoutCancel(ctx)) // bounded by the store's deadline
	})
	return err
}

// writable writes, syncs and removes a small file in dir, opened as
// filelock.Open opens: a link put in its place is refused, never
// followed to a file to truncate, nor a FIFO waited on.
func writable(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := filepath.Join(dir, readyFile)
	f, err := filelock.Open(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte("ready\n"))
	serr := f.Sync()
	cerr := f.Close()
	_ = os.Remove(p)
	return cmp.Or(werr, serr, cerr) // the first that failed
}

// writesProbe is the readiness check of the store's writes, judged by
// the last writes' outcome: nil while the last write made to the store
// succeeded (or was answered). While writes fail, a write that changes
// nothing (pruning the audit entries older than the year 1) is tried,
// one at a time whoever asks, bounded as a write made beside requests;
// its success ends the write outage (package deadline), and its failure
// is the check's, with since when writes fail.
type writesProbe struct {
	sf singleflight.Group
}

func (p *writesProbe) check(ctx context.Context, b *deadline.Bound, st store.Audit) error {
	since, _ := b.WritesFailing()
	if since.IsZero() {
		return nil
	}
	_, err := hold.Shared(ctx, &p.sf, "writes", func() (any, error) {
		if _, err := st.PruneAudit(context.WithoutCancel(ctx), time.Time{}); err != nil {
			return nil, fmt.Errorf("since %s: %s", since.UTC().Format(time.RFC3339), writeFailure(err))
		}
		return nil, nil
	})
	return err
}

// writeFailure says why a write failed, for /readyz: no answer within the
// deadline, or the store's refusal (its driver's message, which names no
// value).
func writeFailure(err error) string {
	if errors.Is(err, deadline.ErrDeadline) {
		return "no answer within the store deadline"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, store.ErrUnavailable.Error()+": "); i >= 0 {
		msg = msg[i+len(store.ErrUnavailable.Error())+2:]
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return "refused: " + msg
}

// readyDeadLetters adds to out, what /readyz answers, the batches the
// store refused for good and the spool set aside (n): the replica stays
// ready, as its calls are recorded, and says it is degraded until an
// operator retries or drops them.
func readyDeadLetters(out map[string]any, n int) {
	switch {
	case n == 0:
		return
	case n < 0: // outbox.DeadUnreadable
		out["deadLetters"] = "unreadable"
		out["spool"] = "degraded: the file of batches the store refuses cannot be read; see boxbroker spool dead list"
		return
	}
	out["deadLetters"] = n
	out["spool"] = fmt.Sprintf("degraded: %d batches the store refuses are set aside; see boxbroker spool dead list", n)
}

// serveReady answers GET or HEAD /readyz on the box-facing listener: 200
// when Ready, 503 when not, with what Ready found as JSON, but for why the
// store's writes fail.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		protocol.WriteRefusal(w, http.StatusMethodNotAllowed, protocol.TypeInvalid, "The readiness route takes GET or HEAD.")
		return
	}
	out, ok := s.Ready(r.Context())
	if _, failing := out["storeWrites"]; failing {
		// The store's refusal can name its host, user and database: the
		// box-facing listener says only that writes fail, and the admin
		// API's /readyz, and the log, say why.
		out["storeWrites"] = "failing"
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write(append(b, '\n'))
	}
}

// withReady serves /readyz on the box-facing listener beside h, for a
// load balancer in front of the replicas.
func (s *Server) withReady(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			s.serveReady(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// recording is what the broker asks before it serves a box's call: nil
// while the outbox records (to the store or to the spool), whatever it
// does when cfg.AuditOptional chooses availability. Whatever
// cfg.AuditOptional says, it is an error once the SQLite database file
// is gone (fw): nothing written to it could be read again.
func recording(cfg Config, ob *outbox.Outbox, fw *fileWatch) func() error {
	if fw == nil && cfg.AuditOptional {
		return nil
	}
	return func() error {
		if err := fw.Err(); err != nil {
			return err
		}
		if cfg.AuditOptional {
			return nil
		}
		return ob.Err()
	}
}
