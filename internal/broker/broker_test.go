package broker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/token"
)

func TestDeclaration_Statuses(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	big := `{"capabilities":[],"pad":"` + strings.Repeat("x", protocol.DeclarationMaxBytes) + `"}`
	tests := []struct {
		name, method, token, body string
		status                    int
	}{
		{"kept", "POST", token, `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`, 200},
		{"no token", "POST", "", `{"capabilities":[]}`, 401},
		{"unknown token", "POST", "bbx_nobody", `{"capabilities":[]}`, 401},
		{"not a report", "POST", token, `{"capabilities":"x"}`, 400},
		{"not JSON", "POST", token, `capabilities=x`, 400},
		{"too large", "POST", token, big, 413},
		{"wrong method", "GET", token, ``, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.Do(tt.method, protocol.RouteDeclaration, tt.token, []byte(tt.body), nil)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if tt.status != 200 {
				if typ, msg := brokertest.Refusal(resp.Body); typ == "" || msg == "" {
					t.Errorf("not a refusal: %s", resp.Body)
				}
			}
		})
	}
}

func TestDeclaration_AnswerEchoesListingAndSpend(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	body := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent","agent"]},{"name":"egress","broker":"door"}],` +
		`"listing":{"published":false,"title":"Salad","line":"a salad app"},` +
		`"spend":{"month":"2026-10","usd":1.84,"runs":3,"unpriced":1,"byPrincipal":[{"principal":"github:octo","usd":1.84,"runs":2,"unpriced":0},{"principal":null,"usd":0,"runs":1,"unpriced":1}]}}`
	resp := b.Do("POST", protocol.RouteDeclaration, token, []byte(body), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	var got map[string]json.RawMessage
	json.Unmarshal(resp.Body, &got)
	want := map[string]string{
		"capabilities": `[{"name":"inference","broker":"lobby","scope":["agent"]}]`,
		"listing":      `{"published":false,"title":"Salad","line":"a salad app"}`,
		"spend":        `{"month":"2026-10","usd":1.84,"runs":3,"unpriced":1,"byPrincipal":[{"principal":"github:octo","usd":1.84,"runs":2,"unpriced":0},{"principal":null,"usd":0,"runs":1,"unpriced":1}]}`,
		"payer":        `{"kind":"shared","principal":null}`,
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	var at string
	json.Unmarshal(got["at"], &at)
	if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
		t.Errorf("at = %q: %v", at, err)
	}
}

// TestDeclaration_RacingReportAnswersWithTheKeptOne: a report taken
// before the one the store keeps (two racing, the later written first)
// is not kept, and its answer is what the broker kept and when, not the
// report it was sent.
func TestDeclaration_RacingReportAnswersWithTheKeptOne(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	tok := b.AddBox("a")
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	keptDoc := `{"capabilities":[{"name":"inference","broker":"lobby","scope":["decide"]}],"at":"` + protocol.FormatTime(later) + `"}`
	if _, err := b.Server.Store.SaveDeclaration(context.Background(), "a", token.Hash(tok), []byte(keptDoc), later); err != nil {
		t.Fatal(err)
	}
	resp := b.Do("POST", protocol.RouteDeclaration, tok, []byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	var got protocol.Kept
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatalf("answer %s: %v", resp.Body, err)
	}
	want := []protocol.Capability{{Name: "inference", Broker: "lobby", Scope: []string{"decide"}}}
	if !reflect.DeepEqual(got.Capabilities, want) || got.At != protocol.FormatTime(later) {
		t.Errorf("answer = %+v at %s, want the kept report, %+v at %s", got.Capabilities, got.At, want, protocol.FormatTime(later))
	}
	if got.Payer == nil || got.Payer.Kind != protocol.PayerShared {
		t.Errorf("answer's payer = %+v, want the box's (shared)", got.Payer)
	}
}

// TestReport_ReplacesTheLast shows the rule judges by the last report only.
func TestReport_ReplacesTheLast(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-x")
	b.Report(token, brokertest.Entry("inference", "agent"))
	if resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil); resp.StatusCode != 200 {
		t.Fatalf("with agent: %d", resp.StatusCode)
	}
	b.Report(token, brokertest.Entry("inference", "decide"))
	resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, "(it lists decide)") {
		t.Errorf("after the second report: %d %q", resp.StatusCode, msg)
	}
}

// TestRotate_OldTokenStopsAtOnce rotates through the store, as the CLI
// does from another process, and shows the cache drops the old token
// within its poll.
func TestRotate_OldTokenStopsAtOnce(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	old := b.AddBox("a")
	b.Report(old, brokertest.Entry("inference", "agent"))
	newToken, _ := token.NewBox()
	if err := b.Server.Store.RotateToken(context.Background(), "a", token.Hash(newToken)); err != nil {
		t.Fatal(err)
	}
	if err := b.Server.Cache.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp := b.Do("POST", protocol.RouteDeclaration, old, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 401 {
		t.Errorf("old token after rotation: %d, want 401", resp.StatusCode)
	}
	if resp := b.Do("POST", protocol.RouteDeclaration, newToken, []byte(`{"capabilities":[]}`), nil); resp.StatusCode != 200 {
		t.Errorf("new token after rotation: %d, want 200", resp.StatusCode)
	}
}

// TestLimits_OneBoxCannotStarveAnother floods one box past its concurrent
// and rate bounds and shows another box is still served.
func TestLimits_OneBoxCannotStarveAnother(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.BoxRate = 5
		c.BoxBurst = 5
	}})
	flood := b.AddBox("flood")
	calm := b.AddBox("calm")
	b.SetCredential("anthropic", "sk-ant-api03-x")
	b.Report(flood, brokertest.Entry("inference", "agent"))
	b.Report(calm, brokertest.Entry("inference", "agent"))
	limited := 0
	for i := 0; i < 20; i++ {
		resp := b.Do("GET", "/llm/anthropic/v1/models", flood, nil, nil)
		if resp.StatusCode == 429 {
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without retry-after")
			}
			if typ, _ := brokertest.Refusal(resp.Body); typ != protocol.TypeRateLimit {
				t.Errorf("429 body %s", resp.Body)
			}
		}
	}
	if limited < 10 {
		t.Errorf("%d of 20 flood requests limited, want at least 10", limited)
	}
	if resp := b.Do("GET", "/llm/anthropic/v1/models", calm, nil, nil); resp.StatusCode != 200 {
		t.Errorf("the calm box got %d", resp.StatusCode)
	}
}

func TestLimits_Concurrent(t *testing.T) {
	hold := make(chan struct{})
	started := make(chan struct{}, 4)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-hold
		w.Write([]byte(`{}`))
	})
	b := brokertest.New(t, brokertest.Options{Anthropic: up, Config: func(c *server.Config) { c.BoxConcurrent = 2 }})
	token := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-x")
	b.Report(token, brokertest.Entry("inference", "agent"))
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() { done <- b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil).StatusCode }()
	}
	<-started
	<-started
	if resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil); resp.StatusCode != 429 {
		t.Errorf("third concurrent request = %d, want 429", resp.StatusCode)
	}
	close(hold)
	for i := 0; i < 2; i++ {
		if s := <-done; s != 200 {
			t.Errorf("held request = %d", s)
		}
	}
	if resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil); resp.StatusCode != 200 {
		t.Errorf("after the held ones finished = %d, want 200", resp.StatusCode)
	}
}

// TestPause refuses every capability of a paused box, still takes its
// reports, and serves it again once resumed — each at the next request.
func TestPause(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("a")
	b.SetCredential("anthropic", "sk-ant-api03-x")
	b.Report(token, brokertest.Entry("inference", "agent"))
	ctx := context.Background()
	setPaused := func(p bool) {
		box, err := b.Server.Store.Box(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		box.Paused = p
		if err := b.Server.Store.UpdateBox(ctx, box); err != nil {
			t.Fatal(err)
		}
		if err := b.Server.Cache.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil)
	if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, "paused by its owner") {
		t.Errorf("paused: %d %s", resp.StatusCode, resp.Body)
	}
	b.Report(token, brokertest.Entry("inference", "agent")) // still accepted
	setPaused(false)
	if resp := b.Do("GET", "/llm/anthropic/v1/models", token, nil, nil); resp.StatusCode != 200 {
		t.Errorf("resumed: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestDeclaration_FloodIsHeldToTheBoxsRate: a box posting reports as
// fast as it can (each a store write, a change every replica's cache
// drops, and a wait for them to settle) is held to its rate like any of
// its requests: past its burst, 429 with Retry-After, the report unread
// and nothing written.
func TestDeclaration_FloodIsHeldToTheBoxsRate(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) {
		c.BoxRate = 0.001 // one more token in 1000 s: none within the test
		c.BoxBurst = 2
	}})
	tok := b.AddBox("flood")
	kept := 0
	for i := range 10 {
		body := `{"capabilities":[{"name":"egress","broker":"lobby","scope":["S` + strconv.Itoa(i) + `"]}]}`
		resp := b.Do("POST", protocol.RouteDeclaration, tok, []byte(body), nil)
		switch resp.StatusCode {
		case http.StatusOK:
			kept++
		case http.StatusTooManyRequests:
			if typ, _ := brokertest.Refusal(resp.Body); typ != protocol.TypeRateLimit || resp.Header.Get("Retry-After") == "" {
				t.Errorf("report %d: 429 %s (Retry-After %q), want a rate_limit_error with Retry-After", i, resp.Body, resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("report %d = %d %s, want 200 or 429", i, resp.StatusCode, resp.Body)
		}
	}
	if kept != 2 {
		t.Errorf("%d of 10 reports kept at a burst of 2, want 2: reports are not held to the box's rate", kept)
	}
	d, err := b.Server.Cache.Declaration(context.Background(), "flood", token.Hash(tok))
	if err != nil || d == nil || len(d.Capabilities) != 1 || d.Capabilities[0].Scope[0] != "S1" {
		t.Errorf("kept report = %+v, %v; want the second, S1", d, err)
	}
}
