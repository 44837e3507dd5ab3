package proxy

import (
	"io"
	"strings"
	"testing"
)

// closeCounter is a body that counts its closes.
type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestPutBack_ReadFirstThenTheRest: the bytes read come first, then the
// rest of the body, and Close closes the body once.
func TestPutBack_ReadFirstThenTheRest(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		read       int // how many bytes were read before
	}{
		{"rest", "the first bytes, then the rest", 15},
		{"all read", "the first bytes", 15},
		{"nothing read", "the first bytes", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			orig := &closeCounter{Reader: strings.NewReader(tt.body)}
			read := make([]byte, tt.read)
			if _, err := io.ReadFull(orig, read); err != nil {
				t.Fatal(err)
			}
			body := PutBack(read, orig)
			got, err := io.ReadAll(body)
			if err != nil || string(got) != tt.body {
				t.Fatalf("read %q, %v; want %q", got, err, tt.body)
			}
			if orig.closed != 0 {
				t.Fatalf("closed %d times before Close", orig.closed)
			}
			if err := body.Close(); err != nil || orig.closed != 1 {
				t.Fatalf("Close: %v, closed %d times; want once", err, orig.closed)
			}
		})
	}
}
