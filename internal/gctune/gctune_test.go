package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		base           int
		headroom, live uint64
		want           int
	}{
		{100, 32 * mib, 4 * mib, 800},      // goal 36 MiB: 32 MiB of headroom
		{100, 32 * mib, 2 * mib, 850},      // bounded: 4 MiB × 8.5 = 34 MiB, the live heap and its headroom
		{100, 32 * mib, 0, 800},            // before the first cycle: a goal of 32 MiB
		{100, 32 * mib, 32 * mib, 100},     // the base: twice the live heap is its headroom already
		{100, 32 * mib, 500 * mib, 100},    // many streams: the base, as without a Tuner
		{300, 32 * mib, 4 * mib, 800},      //
		{1000, 32 * mib, 4 * mib, 1000},    // never below the base (GOGC)
		{100, 32 * mib, 16 * mib, 200},     // goal 48 MiB
		{100, 1 * mib, 100 * mib, 100},     //
		{100, 64 * mib, 1 * mib / 2, 1612}, // bounded by the minimum heap
		{100, 1 << 62, 4 * mib, 26214400},  // an absurd headroom is bounded: 1 TiB
	} {
		got := Percent(c.base, c.headroom, c.live)
		if got != c.want {
			t.Errorf("Percent(%d, %d MiB, %d B) = %d, want %d", c.base, c.headroom/mib, c.live, got, c.want)
		}
		if got > c.base && c.headroom <= maxHeadroom {
			// The goal the runtime will use keeps to live + headroom.
			goal := max(c.live*uint64(100+got)/100, uint64(minHeap)*uint64(got)/100)
			if goal > c.live+c.headroom+c.headroom/50 {
				t.Errorf("Percent(%d, %d MiB, %d B) = %d: goal %d B, beyond live + headroom %d B", c.base, c.headroom/mib, c.live, got, goal, c.live+c.headroom)
			}
		}
	}
}

// TestTuner_FollowsTheLiveHeap runs a Tuner in this process: after a
// collection with a small live heap it raises the percentage, with a live
// heap larger than the headroom it goes back to the base, and Stop
// restores the base.
func TestTuner_FollowsTheLiveHeap(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	t.Setenv("GOGC", "200")
	if Start(64<<20) != nil {
		t.Error("Start with GOGC set tunes; want nil")
	}
	t.Setenv("GOGC", "")

	tu := Start(64 << 20)
	if tu == nil {
		t.Fatal("Start returned nil with a headroom and GOGC=100")
	}
	defer tu.Stop()
	if Start(64<<20) != nil {
		t.Error("a second Start while one runs tunes; want nil")
	}
	waitFor(t, "a raised percentage", func() bool { return tu.Percent() > 100 })
	if got := gcPercent(); got != tu.Percent() {
		t.Errorf("the runtime's percentage is %d, the tuner's %d", got, tu.Percent())
	}

	keep := make([][]byte, 0, 128)
	for range 128 {
		keep = append(keep, make([]byte, 1<<20)) // 128 MiB live: twice the headroom
	}
	waitFor(t, "the base percentage", func() bool { return tu.Percent() == 100 })
	runtime.KeepAlive(keep)

	tu.Stop()
	if got := gcPercent(); got != 100 {
		t.Errorf("after Stop the percentage is %d, want the base 100", got)
	}
	if Start(0) != nil {
		t.Error("Start(0) tunes; want nil")
	}
	debug.SetGCPercent(-1)
	if Start(64<<20) != nil {
		t.Error("Start with GOGC=off tunes; want nil")
	}
	debug.SetGCPercent(100)
}

// waitFor collects garbage until ok, for up to 10 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 10 s of collections (percentage %d)", what, gcPercent())
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}
