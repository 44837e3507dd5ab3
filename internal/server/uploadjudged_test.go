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
// upstream (a long upload through /egress/NAME, a long Messages call) is
// judged again as it is read, as an answer is as it is written: once the
// box is paused or removed, or the token it was sent with is past a
// rotation's grace, what the box sends next never reaches the upstream,
// the upstream's request is broken off rather than ended, the box is
// answered with the refusal, and the request's record keeps its reason.
func TestUpload_EndsOnceItsBoxWouldBeRefused(t *testing.T) {
	tests := []struct {
		name   string
		reason string
		change func(t *testing.T, b *brokertest.Broker, clk *clock)
	}{
		{"paused", capability.ReasonPaused, func(t *testing.T, b *brokertest.Broker, clk *clock) { pauseBox(t, b, "a") }},
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
	// Each capability reads its body through the broker: egress and
	// inference, which answer a broken-off upstream request each in its
	// own way, are both answered with the box's refusal.
	vias := cutVias("big", "upload-judged")
	for _, via := range vias {
		for _, tt := range tests {
			t.Run(via.name+"/"+tt.name, func(t *testing.T) {
				uploadCut(t, via.path, via.serve, tt.reason, func(b *brokertest.Broker, clk *clock) { tt.change(t, b, clk) })
			})
		}
	}
}

// uploadCut streams a body to path, changes the box (change) once the
// upload has reached the upstream, and checks that the rest never does,
// that the box is refused and that the record keeps reason.
func uploadCut(t *testing.T, path string, serve func(b *brokertest.Broker, tok, host string) http.Header, reason string, change func(b *brokertest.Broker, clk *clock)) {
	uploadCutIn(t, brokertest.Options{}, path, serve, reason, change)
}

// uploadCutIn is uploadCut with a broker started with opt (its Anthropic
// upstream and its server's clock set by uploadCutIn), which it returns.
func uploadCutIn(t *testing.T, opt brokertest.Options, path string, serve func(b *brokertest.Broker, tok, host string) http.Header, reason string, change func(b *brokertest.Broker, clk *clock)) *brokertest.Broker {
	first := strings.Repeat("a", 8<<10)
	second := strings.Repeat("b", 8<<10)
	type upload struct {
		body []byte
		err  error
	}
	begun, received := make(chan struct{}), make(chan upload, 1)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got bytes.Buffer
		_, err := io.CopyN(&got, r.Body, 1<<10)
		close(begun)
		if err == nil {
			_, err = io.Copy(&got, r.Body)
		}
		received <- upload{got.Bytes(), err}
	})
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	var clk clock
	opt.Anthropic, opt.ServerOptions = upstream, clk.options
	b := brokertest.New(t, opt)
	tok := b.AddBox("a")
	header := serve(b, tok, up.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", b.URL+path, pr)
	req.Header = header
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
	case <-begun: // the upload reaches the upstream
	case <-ctx.Done():
		t.Fatal("the upload's beginning never reached the upstream")
	}

	change(b, &clk)
	if err := b.Server.Cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Second)
	if _, err := io.WriteString(pw, second); err != nil {
		t.Fatal(err)
	}
	pw.Close() // the box's body ends here: an upstream that sees it end whole was sent it all

	var got upload
	select {
	case got = <-received:
	case <-ctx.Done():
		t.Fatal("the upstream's request never ended")
	}
	if bytes.Contains(got.body, []byte("b")) {
		t.Errorf("the box's next bytes reached the upstream after the change (%d bytes of them)", bytes.Count(got.body, []byte("b")))
	}
	if got.err == nil {
		t.Errorf("the upstream's request ended whole (%d bytes) after the change; want it broken off", len(got.body))
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
		if e.Route != protocol.RouteDeclaration {
			reasons = append(reasons, e.Reason)
		}
	}
	if len(reasons) != 1 || reasons[0] != reason {
		t.Errorf("the upload's records keep the reasons %q, want [%q] (%+v)", reasons, reason, entries)
	}
	return b
}

// cutVia is a route a box's request to be cut goes by: its path, and
// serve, which sets up box "a" of b (token tok) to be served there by
// host and returns the request's header.
type cutVia struct {
	name, path string
	serve      func(b *brokertest.Broker, tok, host string) http.Header
}

// cutVias are egress (the secret STORE at host, the object named object)
// and inference (the shared credential), each with values named by tag.
func cutVias(object, tag string) []cutVia {
	return []cutVia{
		{"egress", "/egress/STORE/objects/" + object, func(b *brokertest.Broker, tok, host string) http.Header {
			b.SetSecret("a", "STORE", host, "sv-"+tag+"-value")
			b.Report(tok, brokertest.Entry(protocol.Egress, "STORE"))
			return http.Header{"Authorization": {"Bearer " + tok}}
		}},
		{"inference", protocol.PrefixAnthropic + "/v1/messages", func(b *brokertest.Broker, tok, _ string) http.Header {
			b.SetCredential("anthropic", "sk-ant-api03-"+tag+"-credential")
			b.Report(tok, brokertest.Entry(protocol.Inference, "agent"))
			return http.Header{"X-Api-Key": {tok}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
		}},
	}
}

// pauseBox pauses box in b's store (the cache sees it when polled).
func pauseBox(t *testing.T, b *brokertest.Broker, box string) {
	t.Helper()
	bx, err := b.Server.Store.Box(context.Background(), box)
	if err != nil {
		t.Fatal(err)
	}
	bx.Paused = true
	if err := b.Server.Store.UpdateBox(context.Background(), bx); err != nil {
		t.Fatal(err)
	}
}
