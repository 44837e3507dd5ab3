package egress

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkSwapBody is the cost of a request body's way to the host:
// marked as it streams, or read whole to write the value in a field the
// secret names.
func BenchmarkSwapBody(b *testing.B) {
	const tok = "bbx_cyXXGantOqZg4q1D0km3lW1kVTU12AR8cZDS1-6Jibs"
	const value = "sk_live_0123456789abcdef0123456789abcdef"
	json64 := `{"client_secret":"` + tok + `","note":"` + strings.Repeat("x", 64<<10) + `"}`
	text4 := strings.Repeat("y", 4<<20)
	tests := []struct {
		name, ctype, body string
		fields            []string
	}{
		{"json 64KiB, no fields", "application/json", json64, nil},
		{"json 64KiB, a named field", "application/json", json64, []string{"client_secret"}},
		{"text 4MiB", "text/plain", text4, nil},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.body)))
			b.ReportAllocs()
			for b.Loop() {
				r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(tt.body))
				r.Header.Set("Content-Type", tt.ctype)
				if err := swapBody(r, tok, value, tt.fields, maxWrites); err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNamedSpans: a value is written only where a top-level field named
// by the secret holds exactly the token, as a form or JSON parser reads
// the body.
func TestNamedSpans(t *testing.T) {
	const tok = "bbx_cyXXGantOqZg4q1D0km3lW1kVTU12AR8cZDS1-6Jibs"
	fields := []string{"key"}
	tests := []struct {
		name, kind, body string
		want             int
	}{
		{"form", bodyForm, "a=1&key=" + tok, 1},
		{"form, key escaped", bodyForm, "k%65y=" + tok, 1},
		{"form, twice", bodyForm, "key=" + tok + "&key=" + tok, 2},
		{"form, other name", bodyForm, "keys=" + tok, 0},
		{"form, no =", bodyForm, "key" + tok, 0},
		{"form, bad escape", bodyForm, "key=%zz" + tok, 0},
		{"json", bodyJSON, `{"key":"` + tok + `"}`, 1},
		{"json, spaces", bodyJSON, "{ \"key\" :\n \"" + tok + "\" }", 1},
		{"json, key escaped", bodyJSON, `{"k\u0065y":"` + tok + `"}`, 1},
		{"json, nested", bodyJSON, `{"a":{"key":"` + tok + `"}}`, 0},
		{"json, in an array", bodyJSON, `[{"key":"` + tok + `"}]`, 0},
		{"json, not a string", bodyJSON, `{"key":["` + tok + `"]}`, 0},
		{"json, invalid", bodyJSON, `{"key":"` + tok + `",}`, 0},
		{"json, trailing garbage", bodyJSON, `{"key":"` + tok + `"}x`, 0},
		{"text", "", "key=" + tok, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(namedSpans([]byte(tt.body), tt.kind, fields, tok)); got != tt.want {
				t.Errorf("namedSpans(%q) = %d spans, want %d", tt.body, got, tt.want)
			}
		})
	}
}
