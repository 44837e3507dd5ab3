package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
)

// lockedBuffer collects logs written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLeaks runs every route — served, refused, failing upstream — with
// distinctive credentials (the shared one, a box owner's, a visitor's and
// the Fountain key), a secret value, a grant and box tokens, then greps
// everything the broker produced. No answer carries a credential, the
// secret value or the grant; no log line carries any of them or any
// token; and each upstream received only what it may: the Anthropic API
// the Anthropic credentials (the visitor's only on a granted call),
// Fountain its key, the secret's host the secret's value, and none of
// them a token or the grant.
func TestLeaks(t *testing.T) {
	const (
		credential = "sk-ant-api03-LEAKCANARY-CREDENTIAL-7f3a9c"
		ownerCred  = "sk-ant-api03-LEAKCANARY-OWNER-41d0e2"
		visitorCrd = "sk-ant-api03-LEAKCANARY-VISITOR-9a7b15"
		fountainKy = "fk-LEAKCANARY-FOUNTAIN-c3e8f6"
		secretVal  = "sv-LEAKCANARY-SECRET-2b8d41"
		visitor    = "github:leak-visitor"
	)
	var echoSeen brokertest.Recorder
	echoSeen.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A careless API that repeats the key in a header and the body.
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		w.Write([]byte(`{"you_sent":"` + r.Header.Get("Authorization") + `","q":"` + r.URL.RawQuery + `"}`))
	})
	echo := httptest.NewServer(&echoSeen)
	defer echo.Close()
	var logs lockedBuffer
	b := brokertest.New(t, brokertest.Options{Logs: &logs, Fountain: true})
	a := b.AddBox("a")
	never := b.AddBox("never")
	o := b.AddBox("o")
	other := b.AddBox("other")
	b.SetCredential(payer.SharedAnthropic, credential)
	b.SetCredential(payer.OwnerAnthropic("o"), ownerCred)
	b.SetCredential(payer.VisitorAnthropic(visitor), visitorCrd)
	b.SetCredential(payer.SharedFountain, fountainKy)
	b.SetSecret("a", "CANARY", echo.URL, secretVal)
	ctx := context.Background()
	ob, err := b.Server.Store.Box(ctx, "o")
	if err != nil {
		t.Fatal(err)
	}
	ob.PayerKind = protocol.PayerOwner
	if err := b.Server.Store.UpdateBox(ctx, ob); err != nil {
		t.Fatal(err)
	}
	b.Sync()
	grantVal, _, err := grant.Issue(ctx, b.Server.Store, "a", visitor, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{a, o, other} {
		b.Report(tok, brokertest.Entry("inference", "agent", "decide"), brokertest.Entry("egress", "CANARY", "UNHELD"),
			brokertest.Entry("feedback", "agent"), brokertest.Entry("fountain", "agent", "conversations", "sandboxes"))
	}
	tokens := []string{a, never, o, other}

	decide := `{"model":"claude-sonnet-4-5","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"x":"x","y":"y"}}}}`
	withGrant := func(h http.Header, g string) http.Header { h.Set(protocol.HeaderGrant, g); return h }
	requests := []struct {
		method, path, body string
		header             http.Header
	}{
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/llm/anthropic/v1/messages/count_tokens", `{}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models", ``, http.Header{"X-Api-Key": {a}}},
		{"GET", "/llm/anthropic/v1/models/claude-x", ``, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/complete", `{}`, http.Header{"X-Api-Key": {a}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {never}}},
		{"POST", "/llm/anthropic/v1/messages", `{}`, http.Header{"X-Api-Key": {a + "x"}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", `{"model":"m"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + never}}},
		// The visitor pays with a grant, on both model routes, streamed too.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal)},
		{"POST", "/decide/v1/systemone", decide, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		// The grant where it does not apply: another box, twice, beside
		// a token that is no box's, and on routes that are not model calls.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {other}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, http.Header{"X-Api-Key": {a}, protocol.HeaderGrant: {grantVal, grantVal}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {a + "x"}}, grantVal)},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m"}`, withGrant(http.Header{"X-Api-Key": {a}}, grantVal+" x")},
		{"GET", "/egress/CANARY/v1/granted", ``, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		{"GET", "/fountain/api/conversations", ``, withGrant(http.Header{"Authorization": {"Bearer " + a}}, grantVal)},
		{"POST", "/api/box/declaration", `{"capabilities":[]}`, withGrant(http.Header{"Authorization": {"Bearer " + never}}, grantVal)},
		// The owner pays for box o.
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","max_tokens":5}`, http.Header{"X-Api-Key": {o}}},
		{"POST", "/decide/v1/systemone", decide, http.Header{"Authorization": {"Bearer " + o}}},
		{"POST", "/llm/anthropic/v1/messages", `{"model":"m","stream":true}`, withGrant(http.Header{"X-Api-Key": {o}}, grantVal)},
		{"GET", "/egress/CANARY/v1/thing?key=" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/egress/CANARY/v1/thing", `{"x":1}`, http.Header{"X-Api-Key": {a}}},
		{"GET", "/egress/UNHELD/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/OTHER/v1", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/egress/CANARY/v1", ``, http.Header{"Authorization": {"Bearer " + never}}},
		{"GET", "/egress/CANARY/v1", ``, http.Header{"Authorization": {"Bearer " + o}}},
		{"GET", "/egress/CANARY/" + a, ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":"x"}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/api/box/declaration", `{"capabilities":[]}`, http.Header{"Authorization": {"Bearer " + a + "x"}}},
		{"POST", "/api/feedback", `{"entries":[{"note":"n"}]}`, http.Header{"Authorization": {"Bearer " + a}}},
		{"GET", "/fountain/api/conversations", ``, http.Header{"Authorization": {"Bearer " + a}}},
		{"POST", "/fountain/api/conversations", `{}`, http.Header{"Authorization": {"Bearer " + o}}},
		{"GET", "/fountain/api/sandboxes/sb-1", ``, http.Header{"Authorization": {"Bearer " + a}}},
	}
	var answers strings.Builder
	for _, rq := range requests {
		resp := b.Do(rq.method, rq.path, "", []byte(rq.body), rq.header)
		resp.Header.Write(&answers)
		answers.Write(resp.Body)
	}
	// The broker's own answer to a report says who pays, and never with what.
	for _, tok := range []string{a, o} {
		kept := b.Report(tok, brokertest.Entry("inference", "agent"))
		fmt.Fprintf(&answers, "%+v", kept)
	}

	secrets := []string{credential, ownerCred, visitorCrd, fountainKy, secretVal, grantVal}
	for _, v := range secrets {
		if strings.Contains(answers.String(), v) {
			t.Errorf("an answer to a box carried %.24s…", v)
		}
		if strings.Contains(logs.String(), v) {
			t.Errorf("the logs carry %.24s…", v)
		}
	}
	for _, tok := range tokens {
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the logs carry a box token")
		}
	}
	dump := func(seen []brokertest.Seen) string {
		var s strings.Builder
		for _, x := range seen {
			x.Header.Write(&s)
			s.WriteString(x.Path + "?" + x.RawQuery)
			s.Write(x.Body)
		}
		return s.String()
	}
	upstreams := []struct {
		name   string
		got    string
		allows []string
	}{
		{"the Anthropic API", dump(b.Upstream.Seen()), []string{credential, ownerCred, visitorCrd}},
		{"Fountain", dump(b.Fountain.Seen()), []string{fountainKy}},
		{"the secret's host", dump(echoSeen.Seen()), []string{secretVal}},
	}
	for _, up := range upstreams {
		for _, v := range append(secrets, tokens...) {
			if strings.Contains(up.got, v) && !slices.Contains(up.allows, v) {
				t.Errorf("%s received %.24s…", up.name, v)
			}
		}
		for _, v := range up.allows {
			if !strings.Contains(up.got, v) {
				t.Errorf("%s never received %.24s…, so that path went untried", up.name, v)
			}
		}
	}
	// The visitor's credential paid exactly the three granted calls of
	// box a, and the owner's exactly box o's three (its grant was a's).
	paidBy := map[string]int{}
	for _, x := range b.Upstream.Seen() {
		paidBy[x.Header.Get("X-Api-Key")]++
	}
	if paidBy[visitorCrd] != 3 || paidBy[ownerCred] != 3 {
		t.Errorf("the visitor's credential paid %d calls and the owner's %d, want 3 and 3", paidBy[visitorCrd], paidBy[ownerCred])
	}
	if !strings.Contains(logs.String(), `"msg":"request"`) || !strings.Contains(logs.String(), `"msg":"grant accepted"`) {
		t.Errorf("no request or accepted grant was logged: %.300s", logs.String())
	}
}
