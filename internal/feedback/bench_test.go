package feedback_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/feedback"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
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

// BenchmarkFeedback_TakenAtTheBound measures a 1 KiB batch kept by a box
// that holds feedback.DefaultMaxBatches batches already (so each one
// kept drops its oldest) against one kept by a box that holds few, in
// the same run, and reports the ratio.
func BenchmarkFeedback_TakenAtTheBound(b *testing.B) {
	br := brokertest.New(b, brokertest.Options{})
	batch := []byte(`{"entries":[{"note":"` + string(bytes.Repeat([]byte("x"), 1000)) + `"}]}`)
	toks := map[string]string{}
	for _, name := range []string{"few", "full"} {
		toks[name] = br.AddBox(name)
		br.Report(toks[name], brokertest.Entry("feedback", "agent"))
		box, _ := br.Server.Store.Box(b.Context(), name)
		box.Consent = true
		_ = br.Server.Store.UpdateBox(b.Context(), box)
	}
	br.Sync()
	for range feedback.DefaultMaxBatches {
		if _, err := br.Server.Store.AddFeedback(b.Context(), store.FeedbackBatch{Box: "full", At: time.Now(), Words: []string{"agent"}, Body: batch}, token.Hash(toks["full"]), store.FeedbackBound{}); err != nil {
			b.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	post := func(tok string) {
		req, _ := http.NewRequest("POST", br.URL+"/api/feedback", bytes.NewReader(batch))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 {
			b.Fatalf("POST /api/feedback = %d, want 202", resp.StatusCode)
		}
	}
	var ft, et time.Duration
	for b.Loop() {
		t0 := time.Now()
		post(toks["few"])
		t1 := time.Now()
		post(toks["full"])
		ft += time.Since(t1)
		et += t1.Sub(t0)
	}
	b.ReportMetric(float64(ft.Nanoseconds())/float64(b.N), "full-ns/op")
	b.ReportMetric(float64(et.Nanoseconds())/float64(b.N), "few-ns/op")
	b.ReportMetric(float64(ft)/float64(et), "full/few")
}
