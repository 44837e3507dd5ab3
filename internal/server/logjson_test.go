package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"
)

// sameAsSlog checks that jsonLines writes r exactly as slog.JSONHandler does.
func sameAsSlog(t *testing.T, r slog.Record) {
	t.Helper()
	var got, want bytes.Buffer
	if err := newJSONLines(&got, slog.LevelDebug).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := slog.NewJSONHandler(&want, &slog.HandlerOptions{Level: slog.LevelDebug}).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Fatalf("jsonLines wrote\n%s\nslog writes\n%s", got.Bytes(), want.Bytes())
	}
}

func TestJSONLines_AsSlogWrites(t *testing.T) {
	at := time.Date(2026, 12, 3, 8, 30, 1, 123456789, time.FixedZone("X", 3600))
	records := [][]slog.Attr{
		{slog.String("method", "POST"), slog.String("path", "/llm/anthropic/v1/messages"), slog.Int("status", 200),
			slog.Int64("bytes", 512), slog.Float64("duration_ms", 0.512), slog.String("box", "alpha"),
			slog.Any("words", []string{"agent", "decide"}), slog.Float64("upstream_ms", 12)},
		{slog.String("s", "quote\" back\\ nl\n cr\r tab\t nul\x00 del\x7f <&> é \xff \u2028\u2029 😀")},
		{slog.Float64("tiny", 1e-7), slog.Float64("big", 1e21), slog.Float64("neg", -3.25), slog.Float64("zero", 0),
			slog.Float64("e", 1.5e-300), slog.Float64("max", math.MaxFloat64)},
		{slog.Bool("b", true), slog.Uint64("u", math.MaxUint64), slog.Duration("d", 1500*time.Millisecond), slog.Time("t", at)},
		{slog.Any("none", []string(nil)), slog.Any("empty", []string{})},
		// Not written by jsonLines itself: slog's handler's.
		{slog.Any("err", errors.New("boom")), slog.Group("g", slog.Int("a", 1)), slog.String("", "empty key"),
			slog.Float64("nan", math.NaN()), slog.Any("m", map[string]int{"a": 1})},
	}
	for _, attrs := range records {
		for _, tm := range []time.Time{at, {}} {
			r := slog.NewRecord(tm, slog.LevelInfo, "request \"line\"", 0)
			r.AddAttrs(attrs...)
			sameAsSlog(t, r)
		}
	}
	r := slog.NewRecord(at, slog.LevelWarn+1, "", 0)
	sameAsSlog(t, r)
}

func FuzzJSONLines(f *testing.F) {
	f.Add("GET", "/egress/x", 0.25, int64(3))
	f.Add("\xff\x00\"", "\u2028<>", -1e-9, int64(-1))
	f.Fuzz(func(t *testing.T, a, b string, x float64, n int64) {
		r := slog.NewRecord(time.Unix(n, n), slog.LevelInfo, a, 0)
		r.AddAttrs(slog.String(b, a), slog.Float64("x", x), slog.Int64("n", n), slog.Any("w", []string{a, b}))
		sameAsSlog(t, r)
	})
}

// BenchmarkRequestLine: a request's log line through slog.JSONHandler and
// through jsonLines.
func BenchmarkRequestLine(b *testing.B) {
	for _, tc := range []struct {
		name string
		h    slog.Handler
	}{
		{"slog.JSONHandler", slog.NewJSONHandler(io.Discard, nil)},
		{"jsonLines", newJSONLines(io.Discard, slog.LevelInfo)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			log := slog.New(tc.h)
			words := []string{"agent"}
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(context.Background(), slog.LevelInfo, "request",
					slog.String("method", "POST"), slog.String("path", "/llm/anthropic/v1/messages"),
					slog.String("route", "/llm/anthropic/v1/messages"), slog.Int("status", 200), slog.Int64("bytes", 512),
					slog.Float64("duration_ms", 0.512), slog.String("box", "alpha"), slog.String("capability", "inference"),
					slog.Any("words", words), slog.Int("upstream_status", 200), slog.Float64("upstream_ms", 0.301))
			}
		})
	}
}
