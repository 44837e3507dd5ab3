package brokertest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// WrappingHost is a secret's host that keeps, as a file, the header
// X-Note of the last POST, after the query's "lead" (a value written
// where a credential goes, kept as a request log keeps it), and answers
// GET with that file as base64 wrapped by how the query's "wrap" asks:
// "github" a JSON content with a newline every 60 characters, as
// GitHub's contents and Git Data APIs answer a blob; "mime" raw base64
// with CRLF every 76, as a mail does; anything else unwrapped.
//
// The attacks on an answer search that finds a value's base64 only whole
// and contiguous use it, through egress and through a proxy's tunnel.
type WrappingHost struct {
	mu   sync.Mutex // guards file
	file string
}

// File is what h keeps.
func (h *WrappingHost) File() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.file
}

func (h *WrappingHost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Method == http.MethodPost {
		h.file = r.URL.Query().Get("lead") + "GITHUB_KEY=" + r.Header.Get("X-Note") + "\n"
		w.WriteHeader(http.StatusCreated)
		return
	}
	enc := base64.StdEncoding.EncodeToString([]byte(h.file))
	switch r.URL.Query().Get("wrap") {
	case "github":
		b, _ := json.Marshal(map[string]string{"encoding": "base64", "content": WrapEvery(enc, 60, "\n")})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	case "mime":
		w.Header().Set("Content-Type", "message/rfc822")
		fmt.Fprintf(w, "Content-Transfer-Encoding: base64\r\n\r\n%s\r\n", WrapEvery(enc, 76, "\r\n"))
	default:
		w.Write([]byte(enc))
	}
}

// WrapEvery puts br after every n characters of s, as GitHub's blob and
// contents APIs (n 60, "\n") and MIME (n 76, "\r\n") write base64.
func WrapEvery(s string, n int, br string) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + br)
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// Unwrap is what a box reads from an answer of a WrappingHost asked for
// wrap: the file, its lines joined and decoded group by group, as a box
// would decode around a hole.
func Unwrap(t testing.TB, body []byte, wrap string) string {
	t.Helper()
	s := string(body)
	if wrap == "github" {
		var v struct{ Content string }
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("the answer %s is not JSON: %v", body, err)
		}
		s = v.Content
	} else if wrap == "mime" {
		_, s, _ = strings.Cut(s, "\r\n\r\n")
	}
	s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	var out []byte
	for i := 0; i+4 <= len(s); i += 4 {
		if b, err := base64.StdEncoding.DecodeString(s[i : i+4]); err == nil {
			out = append(out, b...)
		}
	}
	return string(out)
}
