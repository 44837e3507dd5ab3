package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/intentius/boxbroker/internal/proxy"
)

// tok is shaped like a box token: "bbx_" and 43 base64url characters.
const tok = "bbx_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xyzQR"

// escapeAll writes every character of s as \u00XX.
func escapeAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if upper {
			fmt.Fprintf(&b, `\u%04X`, s[i])
		} else {
			fmt.Fprintf(&b, `\u%04x`, s[i])
		}
	}
	return b.String()
}

// refAll writes every character of s as a character reference in format.
func refAll(s, format string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

func TestScrubTokens(t *testing.T) {
	grant := "bbg_" + tok[4:]
	admin := "bba_" + tok[4:]
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"plain", `{"a":"` + tok + `"}`, 1},
		{"grant", "x " + grant, 1},
		{"admin token", admin + "?", 1},
		{"json-escaped underscore", strings.Replace(tok, "_", `\u005f`, 1), 1},
		{"json-escaped upper hex", strings.Replace(tok, "_", `\u005F`, 1), 1},
		{"every char escaped", escapeAll(tok, false), 1},
		{"every char escaped, upper", escapeAll(tok, true), 1},
		{"percent-escaped", "key=%62%62x%5F" + tok[4:], 1},
		{"mixed", `b\u0062x_` + tok[4:10] + `%41` + tok[11:], 1},
		{"two", tok + "," + tok, 2},
		{"longer run still holds a token", tok + "AAAA", 1},
		{"short", tok[:46], 0},
		{"other prefix", "bbz_" + tok[4:], 0},
		{"no underscore", "hello world", 0},
		{"snake case", "tool_use max_tokens cache_control", 0},
		{"broken escape", strings.Replace(tok, "_", `\u005`, 1), 0},
		{"html references", refAll(tok, "&#%d;"), 1},
		{"hex references", refAll(tok, "&#x%X;"), 1},
		{"html-escaped underscore", strings.Replace(tok, "_", "&#95;", 1), 1},
		{"padded reference", strings.Replace(tok, "_", "&#095;", 1), 1},
		{"json in json", strings.ReplaceAll(escapeAll(tok, false), `\u`, `\\u`), 1},
		{"html in json", strings.Replace(refAll(tok, "&#%d;"), "&", `\u0026`, -1), 1},
		{"html escaped twice", strings.Replace(refAll(tok, "&#x%x;"), "&", "&amp;", -1), 1},
		{"url in a url", "key=%2562%2562x%255F" + tok[4:], 1},
		{"reference past six bytes", strings.Replace(tok, "_", "&#0095;", 1), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := proxy.ScrubTokens(tt.in)
			if n != tt.want {
				t.Fatalf("ScrubTokens(%q) replaced %d, want %d (got %q)", tt.in, n, tt.want, got)
			}
			if len(got) != len(tt.in) {
				t.Errorf("ScrubTokens(%q) changed the length: %d, want %d", tt.in, len(got), len(tt.in))
			}
			if n > 0 && (strings.Contains(got, tok[4:]) || !strings.Contains(got, "[token-removed")) {
				t.Errorf("ScrubTokens(%q) = %q", tt.in, got)
			}
			if n == 0 && got != tt.in {
				t.Errorf("ScrubTokens(%q) = %q, want it unchanged", tt.in, got)
			}
		})
	}
}

// TestTokenScrubber_SplitAnywhere feeds a body holding tokens, written
// plainly and escaped, one byte per read and in larger reads, and checks
// the output is what ScrubTokens gives over the whole.
func TestTokenScrubber_SplitAnywhere(t *testing.T) {
	filler := strings.Repeat(`{"type":"text","text":"a_b \\n c%20"},`, 40)
	body := filler + tok + filler + escapeAll(tok, false) + filler + `"` + strings.Replace(tok, "_", `%5f`, 1) + `"` + filler
	want, n := proxy.ScrubTokens(body)
	if n != 3 {
		t.Fatalf("ScrubTokens replaced %d, want 3", n)
	}
	for _, wrap := range []struct {
		name string
		r    func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data and EOF", iotest.DataErrReader},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			s := proxy.NewTokenScrubber(io.NopCloser(wrap.r(strings.NewReader(body))))
			got, err := io.ReadAll(s)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("scrubbed body differs from ScrubTokens over the whole")
			}
			if s.Replaced() != 3 {
				t.Errorf("Replaced() = %d, want 3", s.Replaced())
			}
		})
	}
}

// TestTokenScrubber_EscapedTwiceSplitAnywhere is the same for tokens
// written as HTML character references and escaped twice, the longest a
// token is written (each character as \u005cu0062, in eleven bytes)
// among them.
func TestTokenScrubber_EscapedTwiceSplitAnywhere(t *testing.T) {
	filler := strings.Repeat(`{"type":"text","text":"a_b &amp; \\n &#95; c%2520"},`, 40)
	longest := strings.ReplaceAll(escapeAll(tok, false), `\u`, `\u005cu`)
	body := filler + refAll(tok, "&#x%x;") + filler + longest + filler + strings.ReplaceAll(refAll(tok, "&#%d;"), "&", "&amp;") + filler
	want, n := proxy.ScrubTokens(body)
	if n != 3 {
		t.Fatalf("ScrubTokens replaced %d, want 3", n)
	}
	for _, step := range []int{1, 2, 3, 5, 7, 11, 100, 1000} {
		got, err := io.ReadAll(proxy.NewTokenScrubber(io.NopCloser(&stepReader{r: strings.NewReader(body), n: step})))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("reads of %d: scrubbed body differs from ScrubTokens over the whole", step)
		}
	}
}

func TestTokenScrubber_BodyWithoutTokenUnchanged(t *testing.T) {
	body := bytes.Repeat([]byte(`{"role":"user","content":"tool_use \u005c %5 bbx_short"}`), 5000)
	got, err := io.ReadAll(proxy.NewTokenScrubber(io.NopCloser(iotest.HalfReader(bytes.NewReader(body)))))
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a body without a token changed (err %v)", err)
	}
}

func TestTokenScrubber_BrokenSourceDropsHeldTail(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("hello "+tok[:20]), iotest.ErrReader(boom))
	got, err := io.ReadAll(proxy.NewTokenScrubber(io.NopCloser(src)))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if strings.Contains(string(got), tok[:20]) {
		t.Errorf("a broken stream passed on the start of a token: %q", got)
	}
}
