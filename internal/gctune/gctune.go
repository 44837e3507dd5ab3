// Package gctune keeps the garbage collector from running often while the
// heap is small.
//
// Go's collector starts a cycle once the heap has grown by GOGC percent
// (100 by default) of what the last cycle found live. A broker's live heap
// is small when it serves short calls (a few MB), and it allocates a few KB
// for every call, so with the default a cycle begins every few hundred
// calls and the collector takes a tenth or more of the broker's CPU. A
// Tuner raises the percentage after each cycle so that the next one waits
// for at least a headroom of new allocation, and lowers it back as the
// live heap grows: with many streams held open (a large live heap) the
// percentage is the base one and the heap goal what it would be anyway, so
// memory a stream costs is unchanged; only the headroom is a fixed cost.
// It is the "memory ballast" some Go servers keep, without the ballast.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultHeadroom is serve's --gc-headroom: at a few KB a call, a
// collection every several thousand small calls rather than every few
// hundred, for about that much more memory.
const DefaultHeadroom = 32 << 20

// maxHeadroom bounds the headroom (and the live heap) Percent computes
// with, so that its products cannot overflow and the percentage fits the
// runtime's 32 bits.
const maxHeadroom = 1 << 40

// running is set while a Tuner runs.
var running atomic.Bool

// minHeap is the runtime's smallest heap goal at a percentage of 100; it
// scales with the percentage (4 MiB × GOGC/100), so a very large
// percentage would let a small heap grow far past its headroom.
const minHeap = 4 << 20

// Tuner adjusts the garbage collector's percentage after each cycle. One
// runs in a process at a time.
type Tuner struct {
	headroom uint64
	base     int

	mu      sync.Mutex
	stopped bool
	percent int // the percentage last set

	sample []metrics.Sample
}

// Start begins tuning so that each collection waits for at least headroom
// bytes of new allocation, never setting less than the percentage the
// process had (100 by default). It returns nil, and tunes nothing, when
// headroom is 0, GOGC is set in the environment (its operator has chosen),
// the collector is off, or another Tuner runs.
func Start(headroom uint64) *Tuner {
	if headroom == 0 || os.Getenv("GOGC") != "" || !running.CompareAndSwap(false, true) {
		return nil
	}
	base := gcPercent()
	if base < 0 {
		running.Store(false)
		return nil
	}
	t := &Tuner{
		headroom: headroom,
		base:     base,
		percent:  base,
		sample:   []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
	}
	t.adjust()
	t.arm()
	return t
}

// gcPercent is the collector's percentage now (below zero: off). The
// runtime offers no read but SetGCPercent, which returns the old value.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// Percent is the percentage the Tuner last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop ends tuning and restores the base percentage.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		t.percent = t.base
		debug.SetGCPercent(t.base)
		running.Store(false)
	}
}

// sentinel is garbage from the moment it is made: its finalizer runs
// after the next collection, adjusts, and sets itself again. (It holds a
// pointer, so it is never one of the runtime's tiny allocations, which
// share a block and can outlive a cycle.)
type sentinel struct {
	t *Tuner
}

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, afterCycle)
}

func afterCycle(s *sentinel) {
	if s.t.adjust() {
		runtime.SetFinalizer(s, afterCycle)
	}
}

// adjust sets the percentage for the live heap the last cycle found, and
// reports whether tuning goes on.
func (t *Tuner) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.sample)
	var live uint64
	if v := t.sample[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	p := Percent(t.base, t.headroom, live)
	if p != t.percent {
		t.percent = p
		debug.SetGCPercent(p)
	}
	return true
}

// Percent is the percentage that gives a live heap of live bytes a
// headroom of at least headroom bytes, and never less than base. It is
// also bounded so that the runtime's minimum heap goal, which grows with
// the percentage, stays within live + headroom.
func Percent(base int, headroom, live uint64) int {
	headroom = min(headroom, maxHeadroom)
	live = min(live, maxHeadroom)
	limit := (live + headroom) * 100 / minHeap
	p := limit
	if live > 0 {
		p = min(headroom*100/live, limit)
	}
	return max(base, int(p))
}
