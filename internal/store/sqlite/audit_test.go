package sqlite

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppendWords checks that appendWords writes what encoding/json
// writes, which ListAudit reads back. The words are the input split at
// commas; "-" alone stands for no words.
func FuzzAppendWords(f *testing.F) {
	for _, s := range []string{"-", "", "agent", "agent,decide,web-search", `quote"d,back\slash`, "<b>&</b>",
		"naïve,✓,emoji-🙂", "tab\there,new\nline,\x00,\x7f", "\u2028\u2029", "\xff\xfe,invalid-utf8-\xc3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var words []string
		if s != "-" {
			words = strings.Split(s, ",")
		}
		want, err := json.Marshal(nonNil(words))
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWords(nil, words); string(got) != string(want) {
			t.Errorf("appendWords(%q) = %s, want %s as encoding/json writes it", words, got, want)
		}
	})
}

func TestAuditChunks(t *testing.T) {
	for n := 0; n <= 3*auditChunk+1; n++ {
		sizes := auditChunks(n)
		sum := 0
		for i, k := range sizes {
			if k < 0 || k > auditChunkLog {
				t.Fatalf("auditChunks(%d) = %v: %d is no statement's size", n, sizes, k)
			}
			if i > 0 && k > sizes[i-1] {
				t.Errorf("auditChunks(%d) = %v, want largest first", n, sizes)
			}
			sum += 1 << k
		}
		if sum != n {
			t.Errorf("auditChunks(%d) = %v, which writes %d rows", n, sizes, sum)
		}
		if n >= auditChunk && sizes[0] != auditChunkLog {
			t.Errorf("auditChunks(%d) = %v, want whole chunks first", n, sizes)
		}
	}
}
