package egressproxy_test

import (
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// BenchmarkProxy_SmallCall compares, in one run, a small GET to the same
// host three ways, each over a kept-alive connection with a warm CA
// cache: through the HTTPS proxy (intercepted, forwarded as
// /egress/NAME), to the broker's /egress/NAME by base URL, and through a
// plain CONNECT tunnel (passthrough, no interception). It reports each
// mode's time per call and the proxy's as ratios to the other two.
//
//	go test -run '^$' -bench BenchmarkProxy_SmallCall ./internal/egressproxy
func BenchmarkProxy_SmallCall(b *testing.B) {
	f := newFixture(b)
	// The secret BENCH is pinned to the passthrough host under another
	// name, so that all three modes reach the one trivial handler.
	port := f.passHost[strings.LastIndex(f.passHost, ":")+1:]
	benchHost := "www.example.com:" + port
	f.b.SetSecret("shop", "BENCH", "https://"+benchHost, secretValue)
	f.b.Report(f.token, brokertest.Entry("egress", "API", "BENCH"))

	proxied := f.client(b, f.token, f.caPool, true)
	passRoots := x509.NewCertPool()
	passRoots.AddCert(f.passCert)
	tunnelled := f.client(b, f.token, passRoots, true)
	direct := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(direct.CloseIdleConnections)

	call := func(c *http.Client, url string, auth bool) {
		req, _ := http.NewRequest("GET", url, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+f.token)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
	}
	modes := []struct {
		name string
		do   func()
	}{
		{"proxy", func() { call(proxied, "https://"+benchHost+"/x", true) }},
		{"egress", func() { call(direct, f.b.URL+"/egress/BENCH/x", true) }},
		{"tunnel", func() { call(tunnelled, "https://"+f.passHost+"/x", false) }},
	}
	for _, m := range modes {
		m.do() // warm: the connection, the tunnel, the leaf
	}
	per := map[string]time.Duration{}
	b.ResetTimer()
	for _, m := range modes {
		start := time.Now()
		for range b.N {
			m.do()
		}
		per[m.name] = time.Since(start) / time.Duration(b.N)
	}
	b.StopTimer()
	for _, m := range modes {
		b.ReportMetric(float64(per[m.name].Microseconds()), m.name+"-µs/call")
	}
	b.ReportMetric(float64(per["proxy"])/float64(per["egress"]), "proxy/egress")
	b.ReportMetric(float64(per["proxy"])/float64(per["tunnel"]), "proxy/tunnel")
}
