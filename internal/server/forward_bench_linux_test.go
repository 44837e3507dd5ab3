package server_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// BenchmarkServe_SmallCall is a small Messages call through the whole
// server — limits, the rule, spend, the Forwarder and its transport, the
// log line, metrics and the audit log — from raw keep-alive clients that
// allocate nothing to a stand-in upstream in its own process. cpu-µs/op
// is this process's CPU (the broker's, and the clients' few syscalls) per
// call.
func BenchmarkServe_SmallCall(b *testing.B) {
	plain, _, _ := standInUpstream(b)
	addr, token := startBroker(b, plain, nil)
	smallCalls(b, addr, token)
}

// BenchmarkServe_AgentCall is BenchmarkServe_SmallCall with a 200 KiB
// body, the size of a coding agent's call mid-session.
func BenchmarkServe_AgentCall(b *testing.B) {
	plain, _, _ := standInUpstream(b)
	addr, token := startBroker(b, plain, nil)
	calls(b, addr, token, agentBody)
}

// BenchmarkServe_AgentCallFloor is BenchmarkServe_SmallCallFloor with
// BenchmarkServe_AgentCall's body.
func BenchmarkServe_AgentCallFloor(b *testing.B) {
	addr, token := startFloor(b)
	calls(b, addr, token, agentBody)
}

// agentBody is a Messages call of 200 KiB: many turns of text.
var agentBody = func() string {
	var turns []string
	for i := 0; len(strings.Join(turns, ",")) < 200<<10; i++ {
		role := []string{"user", "assistant"}[i%2]
		turns = append(turns, `{"role":"`+role+`","content":[{"type":"text","text":"`+strings.Repeat("func main() { fmt.Println(\"turn\") } ", 40)+`"}]}`)
	}
	return `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[` + strings.Join(turns, ",") + `]}`
}()

// BenchmarkServe_SmallCallHTTP2 is BenchmarkServe_SmallCall with the
// stand-in upstream reached as the Anthropic API is, over TLS and HTTP/2,
// through the transport serve makes (trusting the stand-in's certificate).
func BenchmarkServe_SmallCallHTTP2(b *testing.B) {
	_, secure, cert := standInUpstream(b)
	tr := proxy.NewTransport(proxy.TransportOptions{})
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	addr, token := startBroker(b, secure, tr)
	smallCalls(b, addr, token)
}

// BenchmarkServe_SmallCallFloor is BenchmarkServe_SmallCall through the
// least a proxy built from boxbroker's parts does: net/http's server, the
// Forwarder and its transport, the box's key looked up and the
// credential injected, nothing else.
// What BenchmarkServe_SmallCall costs above it is the broker's features.
func BenchmarkServe_SmallCallFloor(b *testing.B) {
	addr, token := startFloor(b)
	smallCalls(b, addr, token)
}

// startFloor serves the floor of BenchmarkServe_SmallCallFloor on
// loopback until b ends, and returns its address and the box's key.
func startFloor(b *testing.B) (addr, token string) {
	plain, _, _ := standInUpstream(b)
	up, err := url.Parse(plain)
	if err != nil {
		b.Fatal(err)
	}
	const key, credential = "bb_floor-token", "sk-ant-api03-floor"
	allowed := map[string]bool{key: true}
	fwd := proxy.New(func(pr *httputil.ProxyRequest) {
		proxy.Target(pr.Out, up, strings.TrimPrefix(pr.In.URL.Path, protocol.PrefixAnthropic), pr.In.URL.RawQuery)
		pr.Out.Header.Set("X-Api-Key", credential)
	}, proxy.NewTransport(proxy.TransportOptions{}), proxy.ErrorHandler(slog.New(slog.DiscardHandler), "upstream"))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[r.Header.Get("X-Api-Key")] {
			protocol.WriteRefusal(w, http.StatusForbidden, protocol.TypePermission, "This box may not call inference.")
			return
		}
		fwd.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), key
}

// smallCalls is the benchmarks' load: raw keep-alive clients, eight a
// processor, each sending a small Messages call with token and reading
// its answer, b.N in all.
func smallCalls(b *testing.B, addr, token string) {
	calls(b, addr, token, `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Say hello in five words."}]}`)
}

// calls makes Messages calls of body through addr with token, from
// raw keep-alive clients, and reports their CPU and rate.
func calls(b *testing.B, addr, token, body string) {
	req := []byte("POST " + protocol.PrefixAnthropic + "/v1/messages HTTP/1.1\r\nHost: broker\r\nX-Api-Key: " + token +
		"\r\nAnthropic-Version: 2023-06-01\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		br := bufio.NewReaderSize(c, 16<<10)
		for pb.Next() {
			if _, err := c.Write(req); err != nil {
				b.Error(err)
				return
			}
			if err := readAnswer(br); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

var contentLength = []byte("content-length:")

// readAnswer reads one 200 answer with a Content-Length.
func readAnswer(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("answer %q", line)
	}
	n := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if len(line) > len(contentLength) && bytes.EqualFold(line[:len(contentLength)], contentLength) {
			n, _ = strconv.Atoi(string(bytes.TrimSpace(line[len(contentLength):])))
		}
	}
	if n < 0 {
		return fmt.Errorf("answer without Content-Length")
	}
	_, err = br.Discard(n)
	return err
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
