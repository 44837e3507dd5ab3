package fountain_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/store"
)

// BenchmarkFountain_Forward measures a request for the box's own sandbox
// through the broker (token, declaration, ownership read from the store,
// key, proxy) against the same request straight to the Fountain stand-in,
// in the same run, and reports the ratio.
func BenchmarkFountain_Forward(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{Fountain: true})
	br.SetCredential("fountain", key)
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("fountain", "sandboxes"))
	if err := br.Server.Store.AddResource(b.Context(), store.Resource{Box: "alpha", Kind: store.ResourceSandbox, ID: "sb1", At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func(url, bearer string) {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("GET %s = %d", url, resp.StatusCode)
		}
	}
	direct := br.Server.Config.FountainURL.String() + "/api/sandboxes/sb1"
	via := br.URL + "/fountain/api/sandboxes/sb1"
	var dt, vt time.Duration
	for b.Loop() {
		t0 := time.Now()
		get(direct, key)
		t1 := time.Now()
		get(via, tok)
		vt += time.Since(t1)
		dt += t1.Sub(t0)
	}
	b.ReportMetric(float64(dt.Nanoseconds())/float64(b.N), "direct-ns/op")
	b.ReportMetric(float64(vt.Nanoseconds())/float64(b.N), "broker-ns/op")
	b.ReportMetric(float64(vt)/float64(dt), "broker/direct")
}
