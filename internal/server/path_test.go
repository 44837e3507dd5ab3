package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/server"
)

// pathProbe is a transport that notes the packages on the stack of the
// box's request as it goes to the upstream (RoundTrip) and as the answer
// comes back from it (each Read and the Close of the answer's body).
type pathProbe struct {
	next http.RoundTripper
	mu   sync.Mutex
	seqs [][]string // guarded by mu: each stack's packages, outermost first
}

func (p *pathProbe) note() {
	pcs := make([]uintptr, 128)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var pkgs []string
	for {
		f, more := frames.Next()
		if pkg := packageOf(f.Function); pkg != "" && (len(pkgs) == 0 || pkgs[len(pkgs)-1] != pkg) {
			pkgs = append(pkgs, pkg)
		}
		if !more {
			break
		}
	}
	slices.Reverse(pkgs)
	p.mu.Lock()
	p.seqs = append(p.seqs, pkgs)
	p.mu.Unlock()
}

// packageOf is the package of a function runtime.Frame names, "" for
// the runtime's and the test's own frames.
func packageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return ""
	}
	pkg := fn[:slash+1+dot]
	switch {
	case pkg == "runtime", pkg == "testing", strings.HasSuffix(pkg, "_test"), strings.HasSuffix(pkg, "/brokertest"):
		return ""
	}
	return pkg
}

func (p *pathProbe) RoundTrip(r *http.Request) (*http.Response, error) {
	p.note()
	resp, err := p.next.RoundTrip(r)
	if err == nil {
		resp.Body = &probedBody{ReadCloser: resp.Body, p: p}
	}
	return resp, err
}

type probedBody struct {
	io.ReadCloser
	p *pathProbe
}

func (b *probedBody) Read(q []byte) (int, error) { b.p.note(); return b.ReadCloser.Read(q) }
func (b *probedBody) Close() error               { b.p.note(); return b.ReadCloser.Close() }

// probedWriter notes the stack of each write of an answer to the box.
type probedWriter struct {
	http.ResponseWriter
	p *pathProbe
}

func (w *probedWriter) WriteHeader(code int)        { w.p.note(); w.ResponseWriter.WriteHeader(code) }
func (w *probedWriter) Write(q []byte) (int, error) { w.p.note(); return w.ResponseWriter.Write(q) }
func (w *probedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// pathFigures counts, over every distinct stack seen, the packages a
// request passes through and its climbs back: a package entered again,
// further down the same stack, after the call left it for another.
func pathFigures(seqs [][]string) (pkgs []string, own int, climbs []string) {
	seen := map[string]bool{}
	climbed := map[string]bool{}
	for _, seq := range seqs {
		for i, pkg := range seq {
			if !seen[pkg] {
				seen[pkg] = true
				pkgs = append(pkgs, pkg)
				if strings.HasPrefix(pkg, "github.com/intentius/boxbroker/") {
					own++
				}
			}
			if slices.Contains(seq[:i], pkg) {
				c := strings.Join(seq[:i+1], " > ")
				if !climbed[c] {
					climbed[c] = true
					climbs = append(climbs, c)
				}
			}
		}
	}
	return pkgs, own, climbs
}

// TestRequestPath_Packages follows a box's Messages call from the
// box-facing handler to the upstream and back, by the stacks of its
// goroutine as it calls the upstream and reads the answer, and logs the
// packages it passes through and its climbs back (go test -run
// TestRequestPath_Packages -v ./internal/server). It is a measurement,
// and fails only when the call does.
func TestRequestPath_Packages(t *testing.T) {
	probe := &pathProbe{next: proxy.NewTransport(proxy.TransportOptions{})}
	b := brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = probe }})
	b.SetCredential("anthropic", "sk-ant-api03-path-credential")
	tok := b.AddBox("alpha")
	b.Report(tok, brokertest.Entry("inference", "agent"))
	// The box reaches the broker's handler through a writer that notes
	// the stack of each write of the answer.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Server.Handler.ServeHTTP(&probedWriter{ResponseWriter: w, p: probe}, r)
	}))
	defer front.Close()
	req, _ := http.NewRequest("POST", front.URL+"/llm/anthropic/v1/messages", strings.NewReader(brokertest.MessagesBody))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("call = %d %s", resp.StatusCode, body)
	}
	probe.mu.Lock()
	seqs := slices.Clone(probe.seqs)
	probe.mu.Unlock()
	pkgs, own, climbs := pathFigures(seqs)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d packages (%d of boxbroker), %d climbs back\n", len(pkgs), own, len(climbs))
	for _, s := range seqs {
		fmt.Fprintf(&sb, "  stack: %s\n", strings.Join(s, " > "))
	}
	for _, c := range climbs {
		fmt.Fprintf(&sb, "  climb: %s\n", c)
	}
	t.Log(sb.String())
}
