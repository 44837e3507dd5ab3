package deadline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// BenchmarkRead reads from a SQLite store in a temporary directory: a
// result set of a thousand rows (ListBoxes) and one row (Box), on a
// store opened without a bound ("plain"), on one whose driver
// operations run through a Bound with calls not bounded
// (Within(ctx, 0): "unbounded") and with the Bound's own bound
// ("bounded"). bounded/plain is what the bound costs a read.
func BenchmarkRead(b *testing.B) {
	const boxes = 1000
	dir := b.TempDir()
	plain, err := sqlite.Open(filepath.Join(dir, "b.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	ctx := context.Background()
	for i := range boxes {
		if err := plain.CreateBox(ctx, store.Box{Name: fmt.Sprintf("box-%04d", i), TokenHash: fmt.Sprint("h", i), CreatedAt: time.Now(), PayerKind: "shared"}); err != nil {
			b.Fatal(err)
		}
	}
	bound, err := sqlite.Open(filepath.Join(dir, "b.db"), sqlite.WithAround(deadline.New(time.Second, quiet()).Around))
	if err != nil {
		b.Fatal(err)
	}
	defer bound.Close()
	stores := []struct {
		name string
		s    store.Store
		ctx  context.Context
	}{
		{"plain", plain, ctx},
		{"unbounded", bound, deadline.Within(ctx, 0)},
		{"bounded", bound, ctx},
	}
	for _, st := range stores {
		b.Run("rows-"+st.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bs, err := st.s.ListBoxes(st.ctx); err != nil || len(bs) != boxes {
					b.Fatalf("ListBoxes = %d boxes, %v; want %d", len(bs), err, boxes)
				}
			}
		})
	}
	for _, st := range stores {
		b.Run("row-"+st.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := st.s.Box(st.ctx, "box-0500"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
