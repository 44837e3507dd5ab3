package proxy

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// NewRedactor returns a Redactor reading src and replacing every old with
// new, as bytes.ReplaceAll would (an empty old replaces nothing); for
// the tests (proxy_test's too), as the broker redacts through a FormSet.
func NewRedactor(src io.ReadCloser, old, new []byte) *Redactor {
	return NewFormSet([]Form{{Old: old, New: new}}).Redactor(src)
}

// chunks is a reader that returns its data in the given read sizes, then
// err (io.EOF when nil).
type chunks struct {
	data  []byte
	sizes []int
	err   error
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, c.sizes[0])
		c.sizes = c.sizes[1:]
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunks) Close() error { return nil }

func redactAll(t testing.TB, src io.ReadCloser, old, new []byte) []byte {
	t.Helper()
	got, err := io.ReadAll(NewRedactor(src, old, new))
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return got
}

// TestRedactor_EverySplitPoint splits a body holding the value at every
// pair of points, so that the value straddles reads in every possible way.
func TestRedactor_EverySplitPoint(t *testing.T) {
	const value = "sk_live_0123456789abcdef"
	const token = "bbx_TOKEN"
	body := []byte("head " + value + " middle " + value + value + " tail sk_live_ " + value)
	want := bytes.ReplaceAll(body, []byte(value), []byte(token))
	for i := 0; i <= len(body); i++ {
		for j := i; j <= len(body); j++ {
			src := &chunks{data: bytes.Clone(body), sizes: []int{i, j - i, 1, 3}}
			if i == 0 {
				src.sizes = []int{1, j, 2}
			}
			got := redactAll(t, src, []byte(value), []byte(token))
			if !bytes.Equal(got, want) {
				t.Fatalf("split at %d, %d: Redactor = %q, want %q", i, j, got, want)
			}
		}
	}
}

// TestRedactor_OneByteReads reads one byte at a time, the worst split.
func TestRedactor_OneByteReads(t *testing.T) {
	tests := []struct {
		name, body, old, new string
	}{
		{"overlapping prefix", "aaab aab aaaab", "aab", "X"},
		{"self-similar value", "abababac ababac abac", "ababac", "-"},
		{"value at the end", "prefix VALUE", "VALUE", "token-longer-than-value"},
		{"partial value at the end", "prefix VALU", "VALUE", "T"},
		{"value alone", "VALUE", "VALUE", ""},
		{"no value", "nothing to see here", "VALUE", "T"},
		{"one-byte value", "a-b-a", "a", "Z"},
		{"empty body", "", "VALUE", "T"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := io.NopCloser(iotest.OneByteReader(bytes.NewReader([]byte(tt.body))))
			got := redactAll(t, src, []byte(tt.old), []byte(tt.new))
			want := bytes.ReplaceAll([]byte(tt.body), []byte(tt.old), []byte(tt.new))
			if !bytes.Equal(got, want) {
				t.Errorf("Redactor(%q, %q→%q) = %q, want %q", tt.body, tt.old, tt.new, got, want)
			}
		})
	}
}

// TestRedactor_HoldsAFixedWindow checks that the Redactor holds back
// exactly Window() bytes of a stream, whatever they are, and passes on
// the rest at once.
func TestRedactor_HoldsAFixedWindow(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewRedactor(pr, []byte("SECRET"), []byte("TOKEN"))
	if r.Window() != 5 {
		t.Fatalf("Window() = %d, want 5", r.Window())
	}
	go func() { _, _ = pw.Write([]byte("event: ping\n\n")) }()
	buf := make([]byte, 64)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "event: p" {
		t.Fatalf("Read = %q, %v, want %q with the last 5 bytes held", buf[:n], err, "event: p")
	}
	go func() { _, _ = pw.Write([]byte("data: SEC")) }()
	n, err = r.Read(buf)
	if err != nil || string(buf[:n]) != "ing\n\ndata" {
		t.Fatalf("Read = %q, %v, want %q with the last 5 bytes held", buf[:n], err, "ing\n\ndata")
	}
	go func() { _, _ = pw.Write([]byte("RET!")); pw.Close() }()
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != ": TOKEN!" {
		t.Fatalf("ReadAll = %q, %v, want %q", rest, err, ": TOKEN!")
	}
}

// emitted reads src through a Redactor of forms, one source read per
// Read, and returns how many bytes each Read passed on.
func emitted(t *testing.T, body []byte, sizes []int, forms []Form) []int {
	t.Helper()
	r := NewFormSet(forms).Redactor(&chunks{data: bytes.Clone(body), sizes: sizes})
	var got []int
	buf := make([]byte, 1<<20)
	for i := 0; i < 10000; i++ {
		n, err := r.Read(buf)
		got = append(got, n)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the Redactor never ended")
	return nil
}

// TestRedactor_CutIsNoOracle is the attack on a Redactor that holds back
// only a tail that could begin the value: a body that ends with a prefix
// of the value is cut elsewhere than one that does not. Here every body
// of the same length, read in the same sizes, is passed on in the same
// sizes, whether it ends with part of the value or not.
func TestRedactor_CutIsNoOracle(t *testing.T) {
	const value = "sk_live_0123456789abcdef"
	forms := []Form{{Old: []byte(value), New: []byte("bbx_T"), Escaped: true}}
	pad := strings.Repeat(".", 200)
	for k := 1; k < len(value); k++ {
		guessed := pad + value[:k] // the host echoed a right guess
		wrong := pad + strings.Repeat("Z", k)
		escaped := pad + strings.ReplaceAll(url.QueryEscape(value[:k]), "_", "%5F")
		escaped = escaped[:len(wrong)]
		for _, sizes := range [][]int{{len(wrong)}, {len(pad), k}, {1, 2, 3, 500}} {
			want := emitted(t, []byte(wrong), sizes, forms)
			for _, body := range []string{guessed, escaped} {
				if got := emitted(t, []byte(body), sizes, forms); !slices.Equal(got, want) {
					t.Fatalf("body ending %q, reads %v: passed on %v, but %v for a body ending %q", body[len(pad):], sizes, got, want, wrong[len(pad):])
				}
			}
		}
	}
}

// TestRedactor_BrokenStreamDropsHeldTail checks that a stream that fails
// with the value's beginning held does not pass that beginning on.
func TestRedactor_BrokenStreamDropsHeldTail(t *testing.T) {
	boom := errors.New("connection reset")
	src := &chunks{data: []byte("ok SECRE"), err: boom}
	got, err := io.ReadAll(NewRedactor(src, []byte("SECRET"), []byte("T")))
	if !errors.Is(err, boom) {
		t.Fatalf("ReadAll error = %v, want %v", err, boom)
	}
	if string(got) != "ok " {
		t.Errorf("ReadAll = %q, want %q", got, "ok ")
	}
}

// TestRedactor_MatchesReplaceAll is the property: for random bodies,
// values and read sizes, the Redactor's output is bytes.ReplaceAll's.
func TestRedactor_MatchesReplaceAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		alphabet := []byte("ab")
		if i%3 == 0 {
			alphabet = []byte("abc\n")
		}
		gen := func(n int) []byte {
			b := make([]byte, n)
			for j := range b {
				b[j] = alphabet[rng.IntN(len(alphabet))]
			}
			return b
		}
		old := gen(1 + rng.IntN(8))
		new := gen(rng.IntN(10))
		body := gen(rng.IntN(300))
		var sizes []int
		for s := 0; s < len(body); {
			n := 1 + rng.IntN(12)
			sizes = append(sizes, n)
			s += n
		}
		checkRedactor(t, body, old, new, sizes)
	}
}

// FuzzRedactor holds the Redactor to bytes.ReplaceAll for any body,
// value, replacement and read size.
func FuzzRedactor(f *testing.F) {
	f.Add([]byte("a SECRET b SECSECRET c SECRE"), []byte("SECRET"), []byte("bbx_x"), uint8(3))
	f.Add([]byte("aaaaaaab"), []byte("aab"), []byte(""), uint8(1))
	f.Add([]byte("abababab"), []byte("abab"), []byte("abab"), uint8(2))
	f.Fuzz(func(t *testing.T, body, old, new []byte, size uint8) {
		if len(old) == 0 {
			return
		}
		n := int(size%64) + 1
		var sizes []int
		for s := 0; s < len(body); s += n {
			sizes = append(sizes, n)
		}
		checkRedactor(t, body, old, new, sizes)
	})
}

func checkRedactor(t *testing.T, body, old, new []byte, sizes []int) {
	t.Helper()
	src := &chunks{data: bytes.Clone(body), sizes: sizes}
	r := NewRedactor(src, old, new)
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	want := bytes.ReplaceAll(body, old, new)
	if !bytes.Equal(got, want) {
		t.Fatalf("Redactor(%q, %q→%q, reads %v) = %q, want %q", body, old, new, sizes, got, want)
	}
	if c := bytes.Count(body, old); r.Replaced() != c {
		t.Fatalf("Redactor(%q, %q).Replaced() = %d, want %d", body, old, r.Replaced(), c)
	}
}

// TestRedactor_BoundedMemory streams 64 MiB holding the value every
// megabyte and checks the Redactor's buffers never grow past their bound.
func TestRedactor_BoundedMemory(t *testing.T) {
	value := bytes.Repeat([]byte("v"), 100)
	src := &patterned{left: 64 << 20, value: value}
	r := NewRedactor(src, value, []byte("t"))
	buf := make([]byte, 8<<10)
	var total int64
	for {
		n, err := r.Read(buf)
		total += int64(n)
		if cap(r.pending) > len(value)-1+redactChunk || cap(r.out) > 2*redactChunk {
			t.Fatalf("buffers grew to pending %d, out %d", cap(r.pending), cap(r.out))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if r.Replaced() != 64 {
		t.Errorf("Replaced() = %d, want 64", r.Replaced())
	}
	if want := int64(64<<20) - 64*int64(len(value)-1); total != want {
		t.Errorf("read %d bytes, want %d", total, want)
	}
}

// patterned yields left bytes of 'x' with value written at every MiB.
type patterned struct {
	left  int64
	pos   int64
	value []byte
}

func (p *patterned) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), p.left))
	for i := 0; i < n; i++ {
		off := (p.pos + int64(i)) % (1 << 20)
		if off < int64(len(p.value)) {
			b[i] = p.value[off]
		} else {
			b[i] = 'x'
		}
	}
	p.pos += int64(n)
	p.left -= int64(n)
	return n, nil
}

func (p *patterned) Close() error { return nil }

func TestRedactHeader(t *testing.T) {
	h := http.Header{
		"X-Echo":        {"Bearer VALUE", "other"},
		"X-Plain":       {"nothing"},
		"X-Name-VALUE":  {"1"},
		"Www-Authorize": {"VALUE VALUE"},
	}
	if n := RedactHeader(h, []Form{{Old: []byte("VALUE"), New: []byte("bbx_T")}}); n != 3 {
		t.Errorf("RedactHeader = %d, want 3", n)
	}
	want := http.Header{"X-Echo": {"Bearer bbx_T", "other"}, "X-Plain": {"nothing"}, "Www-Authorize": {"bbx_T bbx_T"}}
	for k, vs := range want {
		if got := h[k]; len(got) != len(vs) || got[0] != vs[0] {
			t.Errorf("RedactHeader: %s = %q, want %q", k, got, vs)
		}
	}
	//lint:ignore SA1008 the header is set under this exact, non-canonical name above
	if _, ok := h["X-Name-VALUE"]; ok {
		t.Errorf("RedactHeader kept a header whose name holds the value")
	}
}

func TestRedactor_AcrossTheBufferGrowing(t *testing.T) {
	old, new := "sv-SECRET-value-0123456789", "bbx_token"
	for _, at := range []int{redactFirst - len(old), redactFirst - 3, redactFirst, redactFirst + 1, 3 * redactFirst, redactChunk - 5, redactChunk + redactFirst} {
		var b strings.Builder
		for b.Len() < 4*redactChunk {
			b.WriteString(strings.Repeat("x", at))
			b.WriteString(old)
		}
		src := b.String()
		for _, step := range []int{1, 7, 1000, 64 << 10} {
			r := NewRedactor(io.NopCloser(iotest.OneByteReader(strings.NewReader(src))), []byte(old), []byte(new))
			if step > 1 {
				r = NewRedactor(io.NopCloser(strings.NewReader(src)), []byte(old), []byte(new))
			}
			var out strings.Builder
			buf := make([]byte, step)
			for {
				n, err := r.Read(buf)
				out.WriteString(string(buf[:n]))
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if want := strings.ReplaceAll(src, old, new); out.String() != want {
				t.Fatalf("occurrences every %d bytes, reads of %d: output differs from ReplaceAll", at, step)
			}
		}
	}
}

// reference is what a Redactor of forms must yield for body: the regexp
// of every form, leftmost-longest, over the whole body at once.
func reference(body []byte, forms []Form) ([]byte, int) {
	var alts []string
	for _, f := range forms {
		var b strings.Builder
		gap := `(?:\r|\n|\r\n)?`
		if f.Escaped {
			cr, lf := `(?:\r|\\r|%0[dD])`, `(?:\n|\\n|%0[aA])`
			gap = `(?:` + cr + `|` + lf + `|` + cr + lf + `)?`
		}
		for i, c := range f.Old {
			if f.Wrapped && i > 0 {
				b.WriteString(gap)
			}
			if !f.Escaped {
				b.WriteString(regexp.QuoteMeta(string([]byte{c})))
				continue
			}
			b.WriteString("(?:" + regexp.QuoteMeta(string([]byte{c})) + "|" + escapedOnce(c) + "|" + escapedTwice(c) + ")")
		}
		alts = append(alts, b.String())
	}
	whole := make([]*regexp.Regexp, len(forms)) // made when first asked

	re := regexp.MustCompile(`(?s)(?:` + strings.Join(alts, "|") + `)`)
	re.Longest()
	n := 0
	out := re.ReplaceAllFunc(body, func(m []byte) []byte {
		n++
		for i := range whole {
			if whole[i] == nil {
				whole[i] = regexp.MustCompile(`^(?:` + alts[i] + `)$`)
			}
			if whole[i].Match(m) {
				return forms[i].New
			}
		}
		panic("no form matches its own match")
	})
	return out, n
}

// hexOf is the regexp of the two hex digits of c, in either case.
func hexOf(c byte) string {
	return fmt.Sprintf("(?i:%02x)", c)
}

// refsOf is the regexp of what follows the "&" of the character
// references of c, an ASCII byte, of up to six bytes.
func refsOf(c byte) string {
	var alts []string
	for name, of := range map[string]byte{"amp": '&', "AMP": '&', "lt": '<', "LT": '<', "gt": '>', "GT": '>', "quot": '"', "QUOT": '"', "apos": '\''} {
		if of == c {
			alts = append(alts, name+";")
		}
	}
	dec, hx := fmt.Sprint(c), fmt.Sprintf("%x", c)
	alts = append(alts, fmt.Sprintf(`#0{0,%d}%s;`, 3-len(dec), dec), fmt.Sprintf(`#[xX]0{0,%d}(?i:%s);`, 2-len(hx), hx))
	return "(?:" + strings.Join(alts, "|") + ")"
}

// escapedOnce is the regexp of c, an ASCII byte, escaped once: %hh,
// \u00hh, \" \\ or \/, "+" for " ", or a character reference.
func escapedOnce(c byte) string {
	alts := []string{"%" + hexOf(c), `\\u00` + hexOf(c), "&" + refsOf(c)}
	if strings.IndexByte(`"\/`, c) >= 0 {
		alts = append(alts, `\\`+regexp.QuoteMeta(string([]byte{c})))
	}
	if c == ' ' {
		alts = append(alts, `\+`)
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

// escapedTwice is the regexp of c, an ASCII byte, escaped twice: an
// escape of it whose first byte is escaped once, or \" \\ or \/ with
// either byte escaped once.
func escapedTwice(c byte) string {
	alts := []string{escapedOnce('%') + hexOf(c), escapedOnce('\\') + "u00" + hexOf(c), escapedOnce('&') + refsOf(c)}
	if strings.IndexByte(`"\/`, c) >= 0 {
		q := regexp.QuoteMeta(string([]byte{c}))
		alts = append(alts, `(?:\\|`+escapedOnce('\\')+`)(?:`+q+`|`+escapedOnce(c)+`)`)
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

func checkForms(t *testing.T, body []byte, forms []Form, sizes []int) (want []byte, n int) {
	t.Helper()
	r := NewFormSet(forms).Redactor(&chunks{data: bytes.Clone(body), sizes: sizes})
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	want, n = reference(body, forms)
	if !bytes.Equal(got, want) || r.Replaced() != n {
		t.Fatalf("Redactor(%q, forms %+v, reads %v) = %q (%d replaced), want %q (%d)", body, forms, sizes, got, r.Replaced(), want, n)
	}
	return want, n
}

// TestRedactor_FormsMatchReference is the property for several forms,
// escaped or not: the Redactor's output is the reference's.
func TestRedactor_FormsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("ab/ %25\\u0062fF+\r\n\r\nnrA0dD")
	gen := func(n int, from []byte) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = from[rng.IntN(len(from))]
		}
		return b
	}
	for i := 0; i < 3000; i++ {
		var forms []Form
		for k := 0; k < 1+rng.IntN(3); k++ {
			forms = append(forms, Form{Old: gen(1+rng.IntN(5), []byte("ab/ %&<\"'\\")), New: gen(rng.IntN(4), []byte("XY")), Escaped: rng.IntN(2) == 0, Wrapped: rng.IntN(3) == 0})
		}
		body := gen(rng.IntN(200), alphabet)
		if i%2 == 1 {
			body = escapes(rng, rng.IntN(60))
		}
		var sizes []int
		for s := 0; s < len(body); {
			n := 1 + rng.IntN(12)
			sizes = append(sizes, n)
			s += n
		}
		checkForms(t, body, forms, sizes)
	}
}

// escapes is n pieces of text: bytes, and the ways JSON and HTML write
// them, once and twice, some of them longer than a Redactor reads
// (&#0038;) or broken.
func escapes(rng *rand.Rand, n int) []byte {
	pieces := []string{"a", "b", "/", " ", "%", "&", "<", "\"", "'", "\\", ";", "#", "x", "+", "\r", "\n",
		`\"`, `\\`, `\/`, `\n`, `\t`, `\u0026`, `\u003C`, `%26`, `%2f`, `%22`,
		"&amp;", "&AMP;", "&lt;", "&gt;", "&quot;", "&apos;", "&APOS;", "&amp", "&#38;", "&#038;", "&#0038;", "&#x26;", "&#X26;",
		"&#x026;", "&#34;", "&#x22;", "&#39;", "&#039;", "&#x27;", "&#47;", "&#x2F;", "&#x2f;", "&#32;", "&#97;", "&#x61;",
		"&#98;", "&#x62", "&#;", "&#x;", "&#92;", "&#x5c;", "&#60;", "&#x3C;", "&#233;", "&#xe9;",
		`\\\"`, `\\\\`, `\\/`, `\\u0026`, `\u0026amp;`, `\u0026#39;`, `\u0026quot;`, "&amp;amp;", "&amp;#39;", "&#38;quot;",
		`\&quot;`, `\&#34;`, "%2526", "%252f", `%5C%22`, `%5cu0062`, `&#92;&quot;`, `\u005c/`, "&amp;#0038;", `\\u00e9`}
	var b []byte
	for range n {
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return b
}

// TestFormSet_ManyFormsMatchReference is the same property for sets of
// many forms, with enough bytes that start one that the search reads its
// pair table, and with forms that are prefixes of one another and equal.
func TestFormSet_ManyFormsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tried := 0
	gen := func(n int, from []byte) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = from[rng.IntN(len(from))]
		}
		return b
	}
	for i := 0; i < 2000; i++ {
		var forms []Form
		for k := 0; k < 5+rng.IntN(40); k++ {
			var old []byte
			if k > 0 && rng.IntN(4) == 0 {
				prev := forms[rng.IntN(len(forms))].Old // a prefix, an extension or the same
				old = append(bytes.Clone(prev[:1+rng.IntN(len(prev))]), gen(rng.IntN(3), []byte("abcdefgh/ %"))...)
			} else {
				old = gen(1+rng.IntN(6), []byte("abcdefgh/ %&<\"'\\"))
			}
			forms = append(forms, Form{Old: old, New: gen(rng.IntN(4), []byte("XYZ")), Escaped: rng.IntN(2) == 0, Wrapped: rng.IntN(3) == 0})
		}
		if s := NewFormSet(forms); len(s.starts) <= fewStarts {
			continue
		}
		tried++
		body := gen(rng.IntN(300), []byte("abcdefghij/ %25\\u0062fF+\r\n\r\nA0"))
		if i%2 == 1 {
			body = escapes(rng, rng.IntN(80))
		}
		var sizes []int
		for s := 0; s < len(body); {
			n := 1 + rng.IntN(20)
			sizes = append(sizes, n)
			s += n
		}
		want, wn := checkForms(t, body, forms, sizes)
		if got, n := NewFormSet(forms).RedactString(string(body)); got != string(want) || n != wn {
			t.Fatalf("RedactString(%q, %+v) = %q (%d), want %q (%d)", body, forms, got, n, want, wn)
		}
		// The same set made by adding its first forms to a set of the rest.
		k := rng.IntN(len(forms) + 1)
		if got, n := NewFormSet(forms[k:]).With(forms[:k]).RedactString(string(body)); got != string(want) || n != wn {
			t.Fatalf("NewFormSet(%+v).With(%+v).RedactString(%q) = %q (%d), want %q (%d)", forms[k:], forms[:k], body, got, n, want, wn)
		}
	}
	if tried < 1000 {
		t.Errorf("%d sets read the pair table, want at least 1000", tried)
	}
}

// FuzzRedactorForms holds a Redactor of an escaped form and a literal one
// to the reference for any body and read size.
func FuzzRedactorForms(f *testing.F) {
	f.Add([]byte(`{"k":"sk%5Flive\u002fx\/y"} dXNlcjpzaw==`), []byte("sk_live/x/y"), []byte("dXNlcjpzaw=="), uint8(3))
	f.Add([]byte("a%2525b %25%32%35"), []byte("%25"), []byte("%"), uint8(1))
	f.Add([]byte(`<p>p&amp;ss&#39;w&#x27;&quot;d</p> {"k":"p\u0026ss'w\"d\\"}`), []byte(`p&ss'w"d`), []byte(`w"d\`), uint8(5))
	f.Fuzz(func(t *testing.T, body, escaped, literal []byte, size uint8) {
		if len(escaped) == 0 || len(literal) == 0 || len(escaped) > 64 || len(literal) > 64 ||
			!ascii(escaped) || !ascii(literal) {
			return // the reference is a regexp, which reads UTF-8
		}
		n := int(size%64) + 1
		var sizes []int
		for s := 0; s < len(body); s += n {
			sizes = append(sizes, n)
		}
		checkForms(t, body, []Form{{Old: escaped, New: []byte("T1"), Escaped: true}, {Old: literal, New: []byte("T2")}}, sizes)
	})
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// TestRedactor_PassEventsPassesEachWholeEvent: an event stream's event,
// shorter than the window, reaches the reader as it ends, not when the
// next one comes; the value inside an event is still replaced; and the
// cut falls at the same place whether or not the held tail is the start
// of the value, so it tells the reader nothing of the value.
func TestRedactor_PassEventsPassesEachWholeEvent(t *testing.T) {
	value := []byte("sk_live_0123456789abcdefghij")
	for _, tail := range []string{"sk_live_01", "zz_zzzz_zz"} {
		pr, pw := io.Pipe()
		r := NewFormSet([]Form{{Old: value, New: []byte("bbx_TOKEN"), Escaped: true}}).Redactor(pr)
		r.PassEvents()
		go func() {
			_, _ = pw.Write([]byte("data: {\"key\":\"" + string(value) + "\"}\n\ndata: " + tail))
		}()
		buf := make([]byte, 4096)
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf[:n]), "data: {\"key\":\"bbx_TOKEN\"}\n\n"; got != want {
			t.Errorf("tail %q: first read = %q, want the whole first event, replaced: %q", tail, got, want)
		}
		_ = pw.Close()
		rest, _ := io.ReadAll(r)
		if string(rest) != "data: "+tail {
			t.Errorf("tail %q: the rest = %q", tail, rest)
		}
	}
}

// TestRedactor_PassEventsKeepsAValueWithALineBreakWhole: a form that
// holds a line break could be split at an event's end, so PassEvents
// leaves such a Redactor holding back its window as before.
func TestRedactor_PassEventsKeepsAValueWithALineBreakWhole(t *testing.T) {
	value := []byte("line one\n\nline two")
	src := io.NopCloser(iotest.OneByteReader(strings.NewReader("x " + string(value) + " y")))
	r := NewRedactor(src, value, []byte("[gone]"))
	r.PassEvents()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "x [gone] y" {
		t.Errorf("read %q, want the value replaced whole", got)
	}
}

// TestRedactor_LineWrappedBase64OfTheValueIsRedacted is the attack on a
// search for a value's base64 that is whole and contiguous: the host
// answers a blob holding the value as base64 with a line break every 60
// characters (GitHub's contents and Git Data APIs, in JSON: a backslash
// and n) or every 76 with CRLF (MIME), and the box joins the lines and
// decodes it. The base64 of the value, as a Wrapped form, is found
// wherever the breaks fall, whatever the reads.
func TestRedactor_LineWrappedBase64OfTheValueIsRedacted(t *testing.T) {
	value := "sk_live_" + strings.Repeat("0123456789", 4)
	core := base64.StdEncoding.EncodeToString([]byte(value[:len(value)/3*3]))
	wrap := func(s string, every int, br string) string {
		var b strings.Builder
		for len(s) > every {
			b.WriteString(s[:every] + br)
			s = s[every:]
		}
		b.WriteString(s)
		return b.String()
	}
	tests := []struct {
		name  string
		every int
		br    string
	}{
		{"GitHub JSON, every 60", 60, `\n`},
		{"raw LF, every 60", 60, "\n"},
		{"MIME CRLF, every 76", 76, "\r\n"},
		{"JSON CRLF, every 76", 76, `\r\n`},
		{"percent-escaped LF, every 60", 60, "%0A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := NewFormSet([]Form{{Old: []byte(core), New: []byte("[redacted]"), Escaped: true, Wrapped: true}})
			for lead := range 60 {
				// The blob: lead bytes, then the value, so the breaks fall
				// at every place in its base64.
				blob := strings.Repeat("#", lead*3) + value + "\n"
				body := `{"content":"` + wrap(base64.StdEncoding.EncodeToString([]byte(blob)), tt.every, tt.br) + `"}`
				for _, size := range []int{1, 7, 64, len(body)} {
					var sizes []int
					for s := 0; s < len(body); s += size {
						sizes = append(sizes, size)
					}
					got, err := io.ReadAll(set.Redactor(&chunks{data: []byte(body), sizes: sizes}))
					if err != nil {
						t.Fatal(err)
					}
					joined := strings.NewReplacer(tt.br, "", `"}`, "", `{"content":"`, "").Replace(string(got))
					dec, _ := base64.StdEncoding.DecodeString(joined)
					if !bytes.Contains(got, []byte("[redacted]")) || strings.Contains(string(dec), value[3:len(value)-3]) {
						t.Fatalf("Redactor(%q, reads of %d) = %q, want the value's base64 replaced", body, size, got)
					}
				}
			}
		})
	}
}

// TestFormSet_WithOwnReplacesOwnForms: an Own form is replaced by the
// own string of the set searched with, New by each other form.
func TestFormSet_WithOwnReplacesOwnForms(t *testing.T) {
	base := NewFormSet([]Form{{Old: []byte("sk_value"), Own: true, Escaped: true}, {Old: []byte("c2tfdmFs"), New: []byte("[redacted]")}})
	tests := []struct {
		own, in, want string
	}{
		{"bbx_one", "a sk_value b sk%5Fvalue c2tfdmFs", "a bbx_one b bbx_one [redacted]"},
		{"bbx_two", "a sk_value", "a bbx_two"},
	}
	for _, tt := range tests {
		if got, _ := base.WithOwn([]byte(tt.own)).RedactString(tt.in); got != tt.want {
			t.Errorf("WithOwn(%q).RedactString(%q) = %q, want %q", tt.own, tt.in, got, tt.want)
		}
	}
	if got, _ := base.WithOwn([]byte("bbx_one")).With([]Form{{Old: []byte("extra!"), New: []byte("E")}}).RedactString("sk_value extra!"); got != "bbx_one E" {
		t.Errorf("With(extra) of WithOwn = %q, want %q", got, "bbx_one E")
	}
}

// TestRedactHeader_NameInCanonicalCase: the transport writes a header's
// name in canonical case, so a host repeating a value as a name hands the
// box X-Sk_live_… rather than the value as it is; the header is deleted
// all the same, whatever case its name holds the value in, through a set
// made With extra forms too.
func TestRedactHeader_NameInCanonicalCase(t *testing.T) {
	set := NewFormSet([]Form{{Old: []byte("sk_live_abc123def"), Own: true, Escaped: true}}).WithOwn([]byte("bbx_T")).
		With([]Form{{Old: []byte("OtherSecretXYZ"), New: []byte("[redacted]")}})
	h := http.Header{}
	h.Set("X-sk_live_abc123def", "1") // canonical: X-Sk_live_abc123def
	h.Set("Sk_live_abc123def", "2")
	h.Set("X-Othersecretxyz-Y", "3")
	h.Set("X-Kept", "4")
	if n := set.RedactHeader(h); n != 3 {
		t.Errorf("RedactHeader = %d, want 3", n)
	}
	if len(h) != 1 || h.Get("X-Kept") != "4" {
		t.Errorf("RedactHeader left %v, want only X-Kept", h)
	}
}

// TestRedactor_FillKeepsTheLength: a Fill form replaces each occurrence,
// escaped or not, by as many Fill bytes as it spans, so the source's
// length holds.
func TestRedactor_FillKeepsTheLength(t *testing.T) {
	forms := []Form{{Old: []byte("sk-1"), Escaped: true, Fill: '*'}}
	tests := []struct{ in, want string }{
		{`a sk-1 b`, `a **** b`},
		{`a sk\u002d1 b`, `a ********* b`},
		{`a %73k-1 b`, `a ****** b`},
		{`none`, `none`},
	}
	for _, tt := range tests {
		got, _ := RedactString(tt.in, forms)
		if got != tt.want {
			t.Errorf("RedactString(%q) = %q, want %q", tt.in, got, tt.want)
		}
		out, err := io.ReadAll(NewFormSet(forms).Redactor(io.NopCloser(strings.NewReader(tt.in))))
		if err != nil || string(out) != tt.want {
			t.Errorf("Redactor(%q) = %q, %v, want %q", tt.in, out, err, tt.want)
		}
	}
}

// TestRedactor_ValueEscapedTwiceOrPastASCII is a value as encoders write
// it twice over (JSON in a JSON string, HTML in JSON, HTML escaped again,
// JSON in an HTML attribute, a URL in a URL), and one past ASCII as
// encoders that write only ASCII write it (Python's and PHP's JSON,
// ASP.NET's HTML), each found whole however the answer is split.
func TestRedactor_ValueEscapedTwiceOrPastASCII(t *testing.T) {
	quoted := `pa"ss&w/rd<1`
	accented := "pässwörd-€1"
	clef := "pässwörd-𝄞"
	for _, tt := range []struct{ value, as string }{
		{quoted, `pa\\\"ss\\u0026w/rd\\u003c1`},                   // Go's JSON in Go's JSON
		{quoted, `pa\\\"ss&w\\\/rd<1`},                            // PHP's JSON in PHP's JSON
		{quoted, `pa\u0026quot;ss\u0026amp;w/rd\u0026lt;1`},       // an HTML page in Go's or Rails' JSON
		{quoted, `pa&amp;quot;ss&amp;amp;w/rd&amp;lt;1`},          // HTML escaped twice: a feed's description
		{quoted, `pa&amp;#34;ss&amp;amp;w/rd&amp;#60;1`},          // the same from html.EscapeString
		{quoted, `pa\&#34;ss\u0026w/rd\u003c1`},                   // Go's JSON in an html/template attribute
		{quoted, `pa\&quot;ss&amp;w/rd&lt;1`},                     // JSON in an HTML attribute, escaped by Python
		{quoted, `pa%2522ss%2526w%252Frd%253C1`},                  // a URL in a URL's query
		{quoted, `pa%5C%22ss&w/rd<1`},                             // a JSON string in a URL's query
		{accented, `p\u00e4ssw\u00f6rd-\u20ac1`},                  // Python's json.dumps, PHP's json_encode
		{accented, `p\\u00e4ssw\\u00F6rd-\\u20AC1`},               // the same in a JSON string
		{accented, `p&#xE4;ssw&#xF6;rd-&#x20AC;1`},                // ASP.NET's HtmlEncoder
		{accented, `p&#228;ssw&#246;rd-&#8364;1`},                 // XML written as ASCII
		{accented, `p\u0026#xE4;ssw\u0026#xF6;rd-\u0026#x20AC;1`}, // that in Go's JSON
		{accented, `p%C3%A4ssw%c3%b6rd-%E2%82%AC1`},               // a URL
		{clef, `p\u00e4ssw\u00f6rd-\ud834\udd1e`},                 // a surrogate pair
		{clef, `p&#xE4;ssw&#xF6;rd-&#x1D11E;`},
		{clef, `p\\u00e4ssw\\u00f6rd-\\ud834\\udd1e`}, // a surrogate pair in a JSON string
	} {
		body := []byte(`{"echo":"` + tt.as + `","n":1}`)
		want := `{"echo":"[v]","n":1}`
		for size := 1; size <= 8; size++ {
			sizes := make([]int, len(body))
			for i := range sizes {
				sizes[i] = size
			}
			set := NewFormSet([]Form{{Old: []byte(tt.value), New: []byte("[v]"), Escaped: true}})
			got, err := io.ReadAll(set.Redactor(&chunks{data: bytes.Clone(body), sizes: sizes}))
			if err != nil || string(got) != want {
				t.Fatalf("%q written %s, reads of %d: got %q, %v; want %q", tt.value, tt.as, size, got, err, want)
			}
		}
	}
}

// TestRedactor_ReferencesPastSixBytesAByteAreNotRead holds what the
// search does not read: a character reference longer than six bytes for
// each byte of what it writes (&#0038;, &#x00061;), which no escaper
// writes, and a surrogate's half alone.
func TestRedactor_ReferencesPastSixBytesAByteAreNotRead(t *testing.T) {
	for _, tt := range []struct{ value, as string }{
		{"p&ss", "p&#0038;ss"},
		{"pass", "p&#x00061;ss"},
		{"pé", "p&#0000000233;"},
		{"p\uFFFD", `p\ud834`},
	} {
		if got, n := RedactString(tt.as, []Form{{Old: []byte(tt.value), New: []byte("[v]"), Escaped: true}}); n != 0 {
			t.Errorf("%q written %s: got %q, want it unchanged", tt.value, tt.as, got)
		}
	}
}
