package feedback_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// BenchmarkFeedback_Taken measures a 1 KiB batch kept (parsed twice,
// stored in SQLite) against a refused one (parsed, refused by the
// declaration) in the same run, and reports the ratio.
func BenchmarkFeedback_Taken(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	box, _ := br.Server.Store.Box(b.Context(), "alpha")
	box.Consent = true
	_ = br.Server.Store.UpdateBox(b.Context(), box)
	br.Sync()
	batch := []byte(`{"entries":[{"note":"` + string(bytes.Repeat([]byte("x"), 1000)) + `"}]}`)
	refused := []byte(`{"counts":{"n":1}}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(body []byte, want int) {
		req, _ := http.NewRequest("POST", br.URL+"/api/feedback", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			b.Fatalf("POST /api/feedback = %d, want %d", resp.StatusCode, want)
		}
	}
	var kt, rt time.Duration
	for b.Loop() {
		t0 := time.Now()
		post(refused, 403)
		t1 := time.Now()
		post(batch, 202)
		kt += time.Since(t1)
		rt += t1.Sub(t0)
	}
	b.ReportMetric(float64(kt.Nanoseconds())/float64(b.N), "kept-ns/op")
	b.ReportMetric(float64(rt.Nanoseconds())/float64(b.N), "refused-ns/op")
	b.ReportMetric(float64(kt)/float64(rt), "kept/refused")
}
