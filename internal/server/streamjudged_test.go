package server_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestStream_EndsOnceItsBoxWouldBeRefused: an answer still streaming to
// a box (a host's watch, an event stream) is not judged once, at its
// request: once the box is paused or removed, or the token it was asked
// with is past a rotation's grace, what the host sends next never
// reaches the box, the stream ends, and the broker lets go of the
// host's answer. The tunnels of the HTTPS proxy
// are held so (TestProxy_TunnelsCloseWhenTheBoxChanges); this is the
// same for a stream through /egress/NAME.
func TestStream_EndsOnceItsBoxWouldBeRefused(t *testing.T) {
	first := strings.Repeat("a", 8<<10) + "\n"
	second := strings.Repeat("b", 8<<10) + "\n"
	tests := []struct {
		name   string
		change func(t *testing.T, b *brokertest.Broker, clk *clock)
	}{
		{"paused", func(t *testing.T, b *brokertest.Broker, clk *clock) {
			box, err := b.Server.Store.Box(context.Background(), "a")
			if err != nil {
				t.Fatal(err)
			}
			box.Paused = true
			if err := b.Server.Store.UpdateBox(context.Background(), box); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", func(t *testing.T, b *brokertest.Broker, clk *clock) {
			if err := b.Server.Store.DeleteBox(context.Background(), "a"); err != nil {
				t.Fatal(err)
			}
		}},
		{"past a rotation's grace", func(t *testing.T, b *brokertest.Broker, clk *clock) {
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
			more, ended := make(chan struct{}), make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(ended)
				w.Header().Set("Content-Type", "text/plain")
				io.WriteString(w, first)
				w.(http.Flusher).Flush()
				select {
				case <-more:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, second)
				w.(http.Flusher).Flush()
				<-r.Context().Done() // a watch that never ends by itself
			}))
			t.Cleanup(up.Close)
			var clk clock
			b := brokertest.New(t, brokertest.Options{ServerOptions: clk.options})
			tok := b.AddBox("a")
			b.SetSecret("a", "WATCH", up.URL, "sv-stream-judged-value")
			b.Report(tok, brokertest.Entry(protocol.Egress, "WATCH"))

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", b.URL+"/egress/WATCH/watch", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := b.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			if _, err := io.ReadFull(br, make([]byte, 1024)); err != nil {
				t.Fatalf("the stream's beginning: %v", err)
			}

			tt.change(t, b, &clk)
			if err := b.Server.Cache.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			clk.advance(2 * time.Second)
			close(more)
			rest, _ := io.ReadAll(br) // ends: the stream is cut, or the test's deadline
			if bytes.Contains(rest, []byte("b")) {
				t.Errorf("the host's next bytes reached the box after it was %s (%d bytes of them)", tt.name, bytes.Count(rest, []byte("b")))
			}
			if ctx.Err() != nil {
				t.Fatal("the stream went on after its box was refused")
			}
			select {
			case <-ended: // the broker let go of the host's answer
			case <-ctx.Done():
				t.Error("the broker still holds the host's answer open")
			}
		})
	}
}
