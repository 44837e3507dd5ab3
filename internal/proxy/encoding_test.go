package proxy

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGunzip_BoundsWhatItReadsAndWhatItDecodes: a gzip request body is
// decoded up to the bound and no further, both a bomb that decodes to
// far more than it holds and one that holds far more than it decodes to
// (empty blocks, each a flush).
func TestGunzip_BoundsWhatItReadsAndWhatItDecodes(t *testing.T) {
	const limit = 64 << 10
	zip := func(write func(zw *gzip.Writer)) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		write(zw)
		_ = zw.Close()
		return b.Bytes()
	}
	bomb := zip(func(zw *gzip.Writer) { _, _ = zw.Write(make([]byte, 10*limit)) })
	empty := zip(func(zw *gzip.Writer) {
		for range limit {
			_ = zw.Flush() // an empty block of its own, a few bytes each
		}
	})
	within := zip(func(zw *gzip.Writer) { _, _ = io.WriteString(zw, strings.Repeat("a", limit)) })
	tests := []struct {
		name string
		body []byte
		want int // bytes decoded; -1: over the bound
	}{
		{"decodes past the bound", bomb, -1},
		{"holds past the bound", empty, -1},
		{"at the bound", within, limit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := io.ReadAll(Gunzip(io.NopCloser(bytes.NewReader(tt.body)), limit))
			var mbe *http.MaxBytesError
			switch {
			case tt.want < 0 && !errors.As(err, &mbe):
				t.Errorf("Gunzip of %d bytes = %d bytes, %v; want an *http.MaxBytesError", len(tt.body), len(got), err)
			case tt.want >= 0 && (err != nil || len(got) != tt.want):
				t.Errorf("Gunzip = %d bytes, %v; want %d", len(got), err, tt.want)
			}
			if len(got) > limit {
				t.Errorf("Gunzip decoded %d bytes, over the bound %d", len(got), limit)
			}
		})
	}
	if _, err := io.ReadAll(Gunzip(io.NopCloser(strings.NewReader("not gzip")), limit)); err == nil {
		t.Error("Gunzip of a body that is not gzip: no error")
	}
}
