//go:build unix

package egress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// benchStore is a box's secrets in memory, sealed: what the store and
// its cache hand egress.
type benchStore struct {
	secs map[string]map[string]store.Secret // box → name → secret
}

func (s *benchStore) SecretOfToken(_ context.Context, box, _, name string) (store.Secret, error) {
	sec, ok := s.secs[box][name]
	if !ok {
		return store.Secret{}, store.ErrNotFound
	}
	return sec, nil
}

func (s *benchStore) ListSecrets(_ context.Context, box string) ([]store.Secret, error) {
	var out []store.Secret
	for _, sec := range s.secs[box] {
		sec.Sealed = nil
		out = append(out, sec)
	}
	return out, nil
}

// kibAnswer answers every request with 1 KiB of JSON holding no value.
type kibAnswer struct{}

var kib = bytes.Repeat([]byte(`{"id":1234567,"name":"a repository","private":false,"url":"https://api.example.com/r/1"}`+"\n"), 12)[:1<<10]

func (kibAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
		Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: int64(len(kib)),
		Body: io.NopCloser(bytes.NewReader(kib))}, nil
}

// benchEgress is a Capability over boxes boxes, each with secrets
// plain secrets pinned to one host, every one of which has been sent
// there once.
func benchEgress(b testing.TB, boxes, secrets int) (*Capability, *benchStore) {
	b.Helper()
	kr, err := secretsKeyring()
	if err != nil {
		b.Fatal(err)
	}
	st := &benchStore{secs: map[string]map[string]store.Secret{}}
	c, err := New(Config{Secrets: st, List: st, Keyring: kr, Transport: kibAnswer{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range boxes {
		box := fmt.Sprintf("box-%05d", i)
		st.secs[box] = map[string]store.Secret{}
		for j := range secrets {
			name := fmt.Sprintf("S%03d", j)
			value := fmt.Sprintf("sk_live_%05d_%03d_%s", i, j, strings.Repeat("v", 24))
			sealed, err := kr.Seal([]byte(value), secretAD(box, name))
			if err != nil {
				b.Fatal(err)
			}
			st.secs[box][name] = store.Secret{Box: box, Name: name, Host: "https://api.example.com", Sealed: sealed, UpdatedAt: now}
			// As if this box had called its host once through it.
			c.written.sentValue("api.example.com", box, name, value, now)
		}
	}
	return c, st
}

func secretsKeyring() (*secrets.Keyring, error) { return secrets.New(bytes.Repeat([]byte{7}, 32)) }

func secretAD(box, name string) string { return secrets.SecretAD(box, name) }

// benchCall makes egress calls by the first few boxes, in turn, and
// reports the process's CPU time per call.
func benchCall(b *testing.B, c *Capability, st *benchStore, callers int, basic bool) {
	b.Helper()
	type caller struct {
		box, token string
		sec        store.Secret
	}
	var cs []caller
	for i := range callers {
		box := fmt.Sprintf("box-%05d", i)
		cs = append(cs, caller{box: box, token: "bbx_" + strings.Repeat("t", 39) + fmt.Sprintf("%05d", i), sec: st.secs[box]["S000"]})
	}
	call := func(k caller) {
		r := httptest.NewRequest(http.MethodGet, "/egress/S000/user", nil)
		if basic {
			r.SetBasicAuth("x-access-token", k.token)
		} else {
			r.Header.Set("Authorization", "Bearer "+k.token)
		}
		w := httptest.NewRecorder()
		if err := c.Forward(w, r, k.box, k.token, "", k.sec, "/user"); err != nil || w.Code != 200 || w.Body.Len() != len(kib) {
			b.Fatalf("Forward = %v, %d (%d bytes), want 200 with 1 KiB", err, w.Code, w.Body.Len())
		}
	}
	for _, k := range cs {
		call(k) // warm: the listing, anything cached
	}
	runtime.GC() // the setup's garbage is not the calls'
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	for i := 0; b.Loop(); i++ {
		call(cs[i%len(cs)])
	}
	if used := cpuTime() - start; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkEgress_BoxesOnOneHost is an egress call with a 1 KiB answer,
// made in turn by up to 16 boxes, when 1, 100, 1,000 or 10,000 boxes
// each have one secret pinned to the same host and have each sent it
// there: an answer's search must not grow with the other boxes.
//
//	go test -run '^$' -bench 'Egress_(Boxes|Secrets)OnOneHost' -benchtime 2000x ./internal/egress/
func BenchmarkEgress_BoxesOnOneHost(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("boxes=%d", n), func(b *testing.B) {
			c, st := benchEgress(b, n, 1)
			benchCall(b, c, st, min(n, 16), false)
		})
	}
}

// BenchmarkEgress_SecretsOnOneHost is an egress call with a 1 KiB answer
// by a box with 1 or 500 plain secrets pinned to its host, each sent
// there once: the box's own secrets are searched for, but their search
// set need not be made again for every call. The token goes as a Bearer
// token, or in Basic credentials, whose forms the answer is searched for
// beside the kept set.
func BenchmarkEgress_SecretsOnOneHost(b *testing.B) {
	for _, basic := range []bool{false, true} {
		for _, n := range []int{1, 500} {
			name := fmt.Sprintf("secrets=%d", n)
			if basic {
				name += "/basic"
			}
			b.Run(name, func(b *testing.B) {
				c, st := benchEgress(b, 1, n)
				benchCall(b, c, st, 1, basic)
			})
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
