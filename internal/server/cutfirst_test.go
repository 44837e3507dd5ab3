package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TestAnswer_CutBeforeItsFirstByteIsTheRefusal: a box paused while its
// request waits on the upstream, whose answer's status line comes only
// after that, is answered with the 403 refusal, through egress and
// through inference: the broker cuts the request before any of the
// answer reaches the box, and the box gets the refusal, not a connection
// closed with no status line; the request's record keeps the refusal's
// reason and status.
func TestAnswer_CutBeforeItsFirstByteIsTheRefusal(t *testing.T) {
	for _, via := range cutVias("small", "cut-first") {
		t.Run(via.name, func(t *testing.T) {
			arrived, answer := make(chan struct{}), make(chan struct{})
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				close(arrived)
				select {
				case <-answer:
				case <-r.Context().Done():
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"msg_cut_first","type":"message","content":[]}`)
			})
			up := httptest.NewServer(upstream)
			t.Cleanup(up.Close)
			var clk clock
			b := brokertest.New(t, brokertest.Options{Anthropic: upstream, ServerOptions: clk.options})
			tok := b.AddBox("a")
			header := via.serve(b, tok, up.URL)

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", b.URL+via.path, bytes.NewReader([]byte(messages)))
			req.Header = header
			type reply struct {
				status int
				body   []byte
				err    error
			}
			replied := make(chan reply, 1)
			go func() {
				resp, err := b.Client.Do(req)
				if err != nil {
					replied <- reply{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				replied <- reply{resp.StatusCode, body, err}
			}()
			select {
			case <-arrived:
			case <-ctx.Done():
				t.Fatal("the request never reached the upstream")
			}

			pauseBox(t, b, "a")
			if err := b.Server.Cache.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			clk.advance(2 * time.Second)
			close(answer) // the upstream's status line comes after the box is paused

			var got reply
			select {
			case got = <-replied:
			case <-ctx.Done():
				t.Fatal("the box was never answered")
			}
			if got.err != nil {
				t.Fatalf("the box's request: %v; want the 403 refusal", got.err)
			}
			if got.status != http.StatusForbidden || !bytes.Contains(got.body, []byte(`"type":"error"`)) {
				t.Errorf("the box was answered %d %s, want 403 and the refusal", got.status, got.body)
			}
			if bytes.Contains(got.body, []byte("msg_cut_first")) {
				t.Errorf("the upstream's answer reached the box after the cut: %s", got.body)
			}

			if err := b.Server.Audit.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			entries, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Box: "a", Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			var rows []store.AuditEntry
			for _, e := range entries {
				if e.Route != protocol.RouteDeclaration {
					rows = append(rows, e)
				}
			}
			if len(rows) != 1 || rows[0].Reason != "paused" || rows[0].Status != http.StatusForbidden {
				t.Errorf("the request's records = %+v, want one with reason paused and status 403", rows)
			}
		})
	}
}
