package broker

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// An answer of known length keeps its last byte back, whatever the
// writes it comes in, until ServeHTTP has concluded the request (told
// and kept its records, which journals them): the box cannot have its
// whole answer before the call's records are kept.
func TestRecorder_HoldsBackTheLastByteOfAKnownLength(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
	}{
		{"one write", []string{strings.Repeat("a", 20<<10) + "Z"}},
		{"many writes", []string{"aaa", strings.Repeat("b", 9000), "cZ"}},
		{"last write one byte", []string{"abc", "Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			total := 0
			for _, w := range tt.writes {
				total += len(w)
			}
			under := httptest.NewRecorder()
			r := &recorder{ResponseWriter: under, status: http.StatusOK}
			r.Header().Set("Content-Length", strconv.Itoa(total))
			r.WriteHeader(http.StatusOK)
			for _, w := range tt.writes {
				if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v; want %d", n, err, len(w))
				}
			}
			if got := under.Body.Len(); got != total-1 || strings.Contains(under.Body.String(), "Z") {
				t.Errorf("before the request is concluded the box has %d bytes, want %d (all but the last)", got, total-1)
			}
			if !r.holding || r.last != 'Z' || r.bytes != int64(total) {
				t.Errorf("holding %v last %q bytes %d; want true 'Z' %d", r.holding, r.last, r.bytes, total)
			}
		})
	}
	// A body of unknown length (a stream) is passed on whole: it ends
	// with the terminating chunk, written after ServeHTTP returns.
	under := httptest.NewRecorder()
	r := &recorder{ResponseWriter: under, status: http.StatusOK}
	r.Write([]byte("abcZ"))
	if under.Body.String() != "abcZ" || r.holding {
		t.Errorf("an answer of unknown length: passed on %q, holding %v; want all of it", under.Body.String(), r.holding)
	}
}
