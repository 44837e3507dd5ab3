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

// TestDecoding_RefusalQuotesTheHeaderAsSent: an upstream that repeats a
// credential in its Content-Encoding, in upper case, is refused with a
// Why that quotes the header as it wrote it: in lower case the broker
// would write a form of the credential no search looks for, and for a
// credential written in lower case, the credential itself.
func TestDecoding_RefusalQuotesTheHeaderAsSent(t *testing.T) {
	const cred = "sk_live_0123abcdef"
	up := strings.ToUpper(cred)
	tests := []struct {
		values []string
		want   string
	}{
		{[]string{up}, "in a content encoding (" + up + ")"},
		{[]string{"GZIP, " + up}, "in stacked content encodings (GZIP, " + up + ")"},
		{[]string{"Identity, " + up}, "in a content encoding (" + up + ")"},
	}
	for _, tt := range tests {
		_, err := Decoding(tt.values, "gzip")
		var ee *EncodingError
		if !errors.As(err, &ee) || ee.Why != tt.want {
			t.Errorf("Decoding(%q) = %v, want Why %q", tt.values, err, tt.want)
		}
		if ee != nil && strings.Contains(ee.Why, cred) {
			t.Errorf("Decoding(%q)'s Why %q holds the credential in lower case", tt.values, ee.Why)
		}
	}
	if c, err := Decoding([]string{"GZip"}, "gzip"); c != "gzip" || err != nil {
		t.Errorf(`Decoding(["GZip"]) = %q, %v; want "gzip", nil`, c, err)
	}
}
