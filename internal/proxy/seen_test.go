package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestWatch_FindsTheNeedleAcrossReads: the needle is seen whole however
// the answer is cut into reads, once, and the bytes pass unchanged.
func TestWatch_FindsTheNeedleAcrossReads(t *testing.T) {
	const needle = "bbx_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	tests := []struct {
		name, body string
		want       int
	}{
		{"absent", strings.Repeat("GITHUB_KEY=bbx_abcdefghij\n", 50), 0},
		{"once", "GITHUB_KEY=" + needle + "\n", 1},
		{"twice, told once", needle + needle, 1},
		{"at the end", strings.Repeat("x", 1000) + needle, 1},
		{"all but its last byte", strings.Repeat("x", 1000) + needle[:len(needle)-1], 0},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 2, 7, 46, 47, 48, 4096} {
			n := 0
			r := Watch(io.NopCloser(iotest.OneByteReader(strings.NewReader(tt.body))), needle, func() { n++ })
			if size > 1 {
				r = Watch(io.NopCloser(&cutReader{s: tt.body, size: size}), needle, func() { n++ })
			}
			got, err := io.ReadAll(r)
			if err != nil || string(got) != tt.body || n != tt.want {
				t.Errorf("%s, reads of %d: Watch = %d calls, %d bytes, %v; want %d calls and the body unchanged", tt.name, size, n, len(got), err, tt.want)
			}
		}
	}
}

// cutReader reads s size bytes at a time.
type cutReader struct {
	s    string
	size int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.s)
	c.s = c.s[n:]
	return n, nil
}

// BenchmarkWatch is the watch's cost on a 200 KiB answer read 32 KiB at
// a time, as the redactor reads it, without the needle (a token's
// random body): a JSON listing whose every line holds tokens' prefixes
// and many "Z" (dense: the needle's first byte, at every turn) and
// the same with none (plain).
func BenchmarkWatch(b *testing.B) {
	const needle = "Zq8vR3kLm0Xw2Tn9Pc4Hs7Yd1Jf6Bg5Ua_Ei-Ko3Vx8Qr" // a token's body, as egress watches for it
	dense := strings.Repeat(`{"sha":"ZZZZZ6789abcdef","path":"src/bbx_Zile.go","mode":"Z00644"}`+"\n", 200<<10/68)
	for _, bc := range []struct{ name, body string }{{"dense", dense}, {"plain", strings.ReplaceAll(dense, "Z", "c")}} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				r := Watch(io.NopCloser(strings.NewReader(bc.body)), needle, func() {})
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}

// TestWatchAnswer_TellsOnceAnAnswer: a needle in the headers and the
// body, or twice in the body, is told once; none, never.
func TestWatchAnswer_TellsOnceAnAnswer(t *testing.T) {
	const needle = "bbx_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
	tests := []struct {
		name, header, body string
		want               int
	}{
		{"neither", "text/plain", "hello", 0},
		{"header", "x " + needle, "hello", 1},
		{"body", "text/plain", needle + needle, 1},
		{"both", "x " + needle, "GITHUB_KEY=" + needle, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			h := http.Header{"X-Echo": {tt.header}}
			w := WatchAnswer(h, needle, func() { n++ })
			got, err := io.ReadAll(w.Body(io.NopCloser(strings.NewReader(tt.body))))
			if err != nil || string(got) != tt.body || n != tt.want {
				t.Errorf("WatchAnswer(%q) = %d calls, %q, %v; want %d calls and the body unchanged", tt.header, n, got, err, tt.want)
			}
		})
	}
}
