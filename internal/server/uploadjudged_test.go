package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestUpload_EndsOnceItsBoxWouldBeRefused: a request body still streaming
// upstream (a long upload through /egress/NAME) is judged again as it is
// read, as an answer is as it is written: once the box is paused or
// removed, or the token it was sent with is past a rotation's grace, what
// the box sends next never reaches the host, the host's request is broken
// off rather than ended, the box is answered with the refusal, and the
// request's record keeps its reason.
func TestUpload_EndsOnceItsBoxWouldBeRefused(t *testing.T) {
	first := strings.Repeat("a", 8<<10)
	second := strings.Repeat("b", 8<<10)
	tests := []struct {
		name   string
		reason string
		change func(t *testing.T, b *brokertest.Broker, clk *clock)
	}{
		{"paused", capability.ReasonPaused, func(t *testing.T, b *brokertest.Broker, clk *clock) {
			box, err := b.Server.Store.Box(context.Background(), "a")
			if err != nil {
				t.Fatal(err)
			}
			box.Paused = true
			if err := b.Server.Store.UpdateBox(context.Background(), box); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", capability.ReasonToken, func(t *testing.T, b *brokertest.Broker, clk *clock) {
			if err := b.Server.Store.DeleteBox(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
		}},
		{"past a rotation's grace", capability.ReasonExpired, func(t *testing.T, b *brokertest.Broker, clk *clock) {
			next, _ := token.NewBox()
			if err := b.Server.Store.ReplaceToken(context.Background(), "a", store.Rotation{Hash: token.Hash(next),
				GraceUntil: clk.now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			clk.advance(2 * time.Minute)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type upload struct {
				body []byte
				err  error
			}
			begun, received := make(chan struct{}), make(chan upload, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var got bytes.Buffer
				_, err := io.CopyN(&got, r.Body, 1<<10)
				close(begun)
				if err == nil {
					_, err = io.Copy(&got, r.Body)
				}
				received <- upload{got.Bytes(), err}
			}))
			t.Cleanup(up.Close)
			var clk clock
			b := brokertest.New(t, brokertest.Options{ServerOptions: clk.options})
			tok := b.AddBox("a")
			b.SetSecret("a", "STORE", up.URL, "sv-upload-judged-value")
			b.Report(tok, brokertest.Entry(protocol.Egress, "STORE"))

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			req, _ := http.NewRequestWithContext(ctx, "PUT", b.URL+"/egress/STORE/objects/big", pr)
			req.Header.Set("Authorization", "Bearer "+tok)
			type answer struct {
				status int
				body   []byte
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := b.Client.Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				answered <- answer{resp.StatusCode, body, err}
			}()
			go io.WriteString(pw, first)
			select {
			case <-begun: // the upload reaches the host
			case <-ctx.Done():
				t.Fatal("the upload's beginning never reached the host")
			}

			tt.change(t, b, &clk)
			if err := b.Server.Cache.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			clk.advance(2 * time.Second)
			if _, err := io.WriteString(pw, second); err != nil {
				t.Fatal(err)
			}
			pw.Close() // the box's body ends here: a host that sees it end whole was sent it all

			var got upload
			select {
			case got = <-received:
			case <-ctx.Done():
				t.Fatal("the host's request never ended")
			}
			if bytes.Contains(got.body, []byte("b")) {
				t.Errorf("the box's next bytes reached the host after it was %s (%d bytes of them)", tt.name, bytes.Count(got.body, []byte("b")))
			}
			if got.err == nil {
				t.Errorf("the host's request ended whole (%d bytes) after its box was %s; want it broken off", len(got.body), tt.name)
			}

			var a answer
			select {
			case a = <-answered:
			case <-ctx.Done():
				t.Fatal("the box was never answered")
			}
			if a.err != nil {
				t.Fatalf("the box's request: %v", a.err)
			}
			if a.status != http.StatusForbidden || !bytes.Contains(a.body, []byte(`"type":"error"`)) {
				t.Errorf("the box was answered %d %s, want 403 and the refusal", a.status, a.body)
			}

			if err := b.Server.Audit.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			entries, err := b.Server.Store.ListAudit(context.Background(), store.AuditQuery{Box: "a", Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			var reasons []string
			for _, e := range entries {
				if e.Capability == "egress" {
					reasons = append(reasons, e.Reason)
				}
			}
			if len(reasons) != 1 || reasons[0] != tt.reason {
				t.Errorf("the upload's records keep the reasons %q, want [%q] (%+v)", reasons, tt.reason, entries)
			}
		})
	}
}
