package feedback_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/feedback"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// consenting is a broker whose box alpha reports feedback with words and
// whose owner has consented; it returns the broker and alpha's token.
func consenting(t *testing.T, words ...string) (*brokertest.Broker, string) {
	t.Helper()
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", words...))
	setConsent(t, br, "alpha", true)
	return br, tok
}

// setConsent writes a box's consent straight to the store, as
// `boxbroker box consent` does from another process, and lets the server's
// cache read the change log.
func setConsent(t *testing.T, br *brokertest.Broker, name string, on bool) {
	t.Helper()
	ctx := context.Background()
	b, err := br.Server.Store.Box(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b.Consent = on
	if err := br.Server.Store.UpdateBox(ctx, b); err != nil {
		t.Fatal(err)
	}
	br.Sync()
}

func kept(t *testing.T, br *brokertest.Broker, name string) []store.FeedbackBatch {
	t.Helper()
	fb, _, err := br.Server.Store.ListFeedback(context.Background(), store.FeedbackQuery{Box: name, Limit: store.MaxFeedbackPage})
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

// isDeclarationRefusal reports whether msg reads as a refusal by the
// declaration (protocol.DeclaredRefusal's wording).
func isDeclarationRefusal(msg string) bool {
	for _, s := range []string{"does not list", "declares no", "has no declaration"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

type taken struct {
	Taken bool  `json:"taken"`
	ID    int64 `json:"id"`
}

func TestFeedback_Taken(t *testing.T) {
	br, tok := consenting(t, "agent", "passive")
	tests := []struct {
		name  string
		body  string
		words []string
	}{
		{"entries", `{"entries":[{"note":"the checkout button hides on phones"}]}`, []string{"agent"}},
		{"counts", `{"counts":{"refusals":2}}`, []string{"passive"}},
		{"both, kept byte for byte", "{ \"counts\" : {\"restarts\":1},\n \"entries\":[{\"note\":\"<b>&</b>\"}], \"extra\": true }", []string{"agent", "passive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(kept(t, br, "alpha"))
			resp := br.Do("POST", "/api/feedback", tok, []byte(tt.body), nil)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST /api/feedback %s = %d %s, want 202", tt.body, resp.StatusCode, resp.Body)
			}
			var got taken
			if err := json.Unmarshal(resp.Body, &got); err != nil || !got.Taken || got.ID <= 0 {
				t.Fatalf("POST /api/feedback answer = %s (%v), want {taken: true, id: N}", resp.Body, err)
			}
			fb := kept(t, br, "alpha")
			if len(fb) != before+1 {
				t.Fatalf("ListFeedback(alpha) = %d batches, want %d", len(fb), before+1)
			}
			last := fb[len(fb)-1]
			if last.ID != got.ID || last.Box != "alpha" || string(last.Body) != tt.body || !slices.Equal(last.Words, tt.words) || last.At.IsZero() {
				t.Errorf("kept batch = {%d %s %q %q %v}, want {%d alpha %q %q <time>}", last.ID, last.Box, last.Body, last.Words, last.At, got.ID, tt.body, tt.words)
			}
		})
	}
}

func TestFeedback_NoConsentIsThePolicysRefusal(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent", "passive"))
	resp := br.Do("POST", "/api/feedback", tok, []byte(`{"entries":[{"note":"n"}]}`), nil)
	typ, msg := brokertest.Refusal(resp.Body)
	if resp.StatusCode != http.StatusForbidden || typ != "permission_error" {
		t.Fatalf("POST /api/feedback without consent = %d %s, want 403 permission_error", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(msg, "consent") || !strings.Contains(msg, "missing") || isDeclarationRefusal(msg) {
		t.Errorf("refusal without consent = %q, want one that says consent is missing and is not the declaration's", msg)
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("ListFeedback(alpha) = %d batches after a refusal, want 0", len(fb))
	}
}

// TestFeedback_ConsentReachesTheServerThroughTheChangeLog: the server
// caches the box by its token, so consent written by another process (the
// CLI) must reach it through the store's change log, both ways.
func TestFeedback_ConsentReachesTheServerThroughTheChangeLog(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	body := []byte(`{"entries":[{"note":"n"}]}`)
	steps := []struct {
		consent bool
		want    int
	}{{false, 403}, {true, 202}, {false, 403}, {true, 202}}
	for i, s := range steps {
		if i > 0 { // the first request caches the box as created
			setConsent(t, br, "alpha", s.consent)
		}
		if resp := br.Do("POST", "/api/feedback", tok, body, nil); resp.StatusCode != s.want {
			t.Fatalf("step %d: POST /api/feedback with consent %v = %d %s, want %d", i, s.consent, resp.StatusCode, resp.Body, s.want)
		}
	}
	if fb := kept(t, br, "alpha"); len(fb) != 2 {
		t.Errorf("ListFeedback(alpha) = %d batches, want 2", len(fb))
	}
}

func TestFeedback_KeepingNoneAnswers501(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{Config: func(c *server.Config) { c.Feedback = server.FeedbackOff }})
	tok := br.AddBox("alpha")
	other := br.AddBox("beta")
	br.Report(tok, brokertest.Entry("feedback", "agent", "passive"))
	br.Report(other, brokertest.Entry("feedback", "agent"))
	setConsent(t, br, "alpha", true)
	tests := []struct {
		name  string
		token string
		body  string
		want  int
	}{
		{"a batch from a consenting box", tok, `{"entries":[{}],"counts":{"a":1}}`, http.StatusNotImplemented},
		{"a batch from a box without consent", other, `{"entries":[{}]}`, http.StatusNotImplemented},
		{"an empty batch is still a 400", tok, `{}`, http.StatusBadRequest},
		{"the declaration still comes first", other, `{"counts":{"a":1}}`, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := br.Do("POST", "/api/feedback", tt.token, []byte(tt.body), nil)
			if resp.StatusCode != tt.want {
				t.Fatalf("POST /api/feedback %s = %d %s, want %d", tt.body, resp.StatusCode, resp.Body, tt.want)
			}
			if typ, msg := brokertest.Refusal(resp.Body); tt.want == 501 && (typ != "not_supported_error" || !strings.Contains(msg, "keeps no feedback")) {
				t.Errorf("501 refusal = %s %q, want not_supported_error saying the broker keeps no feedback", typ, msg)
			}
		})
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("ListFeedback(alpha) = %d batches with feedback off, want 0", len(fb))
	}
}

func TestFeedback_RefusedByTheDeclaration(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	agentOnly := br.AddBox("agent-only")
	passiveOnly := br.AddBox("passive-only")
	unreported := br.AddBox("unreported")
	br.Report(agentOnly, brokertest.Entry("feedback", "agent"))
	br.Report(passiveOnly, brokertest.Entry("feedback", "passive"))
	for _, name := range []string{"agent-only", "passive-only", "unreported"} {
		setConsent(t, br, name, true)
	}
	tests := []struct {
		name, token, body, word string
	}{
		{"counts without passive", agentOnly, `{"counts":{"conformance":1}}`, "passive"},
		{"both with only agent", agentOnly, `{"entries":[{}],"counts":{"a":1}}`, "passive"},
		{"entries without agent", passiveOnly, `{"entries":[{}]}`, "agent"},
		{"a box that never reported", unreported, `{"entries":[{}]}`, "agent"},
		{"counts given twice, the last empty, are judged by the widest reading", agentOnly, `{"counts":{"a":1},"counts":{}}`, "passive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := br.Do("POST", "/api/feedback", tt.token, []byte(tt.body), nil)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(msg, "feedback") || !strings.Contains(msg, tt.word) {
				t.Errorf("POST /api/feedback %s = %d %q, want 403 naming feedback and %s", tt.body, resp.StatusCode, msg, tt.word)
			}
		})
	}
	for _, name := range []string{"agent-only", "passive-only", "unreported"} {
		if fb := kept(t, br, name); len(fb) != 0 {
			t.Errorf("ListFeedback(%s) = %d batches after refusals, want 0", name, len(fb))
		}
	}
}

func TestFeedback_InvalidBatches(t *testing.T) {
	br, tok := consenting(t, "agent", "passive")
	tests := []struct {
		name, body string
		want       int
	}{
		{"neither entries nor counts", `{}`, 400},
		{"empty entries and counts", `{"entries":[],"counts":{}}`, 400},
		{"no body", ``, 400},
		{"not JSON", `entries[]=1`, 400},
		{"null", `null`, 400},
		{"an array", `[{"note":"n"}]`, 400},
		{"entries an object", `{"entries":{"note":"n"}}`, 400},
		{"counts an array beside entries", `{"entries":[{}],"counts":[1]}`, 400},
		{"entries given twice", `{"entries":[],"entries":[{}]}`, 400},
		{"trailing data", `{"entries":[{}]}x`, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := br.Do("POST", "/api/feedback", tok, []byte(tt.body), nil)
			typ, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.want || typ != "invalid_request_error" || msg == "" {
				t.Errorf("POST /api/feedback %q = %d %s, want %d invalid_request_error", tt.body, resp.StatusCode, resp.Body, tt.want)
			}
		})
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("ListFeedback(alpha) = %d batches after invalid ones, want 0", len(fb))
	}
}

// padded is a batch of exactly n bytes.
func padded(n int) []byte {
	const head, tail = `{"entries":["`, `"]}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// post sends body with no Content-Length (chunked) when chunked is set.
func post(t *testing.T, br *brokertest.Broker, token string, body []byte, chunked bool) int {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r)
	}
	req, err := http.NewRequest("POST", br.URL+"/api/feedback", r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestFeedback_SizeBound(t *testing.T) {
	br, tok := consenting(t, "agent")
	tests := []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"at the bound", feedback.DefaultMaxBody, false, 202},
		{"at the bound, chunked", feedback.DefaultMaxBody, true, 202},
		{"one byte over", feedback.DefaultMaxBody + 1, false, 413},
		{"one byte over, chunked", feedback.DefaultMaxBody + 1, true, 413},
		{"far over, chunked", 8 * feedback.DefaultMaxBody, true, 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(t, br, tok, padded(tt.size), tt.chunked); got != tt.want {
				t.Errorf("POST /api/feedback of %d bytes (chunked %v) = %d, want %d", tt.size, tt.chunked, got, tt.want)
			}
		})
	}
	if fb := kept(t, br, "alpha"); len(fb) != 2 {
		t.Errorf("ListFeedback(alpha) = %d batches, want the 2 at the bound", len(fb))
	}
	// An unknown token's oversize batch is refused without reading it whole.
	if got := post(t, br, "bbx_unknown", padded(feedback.DefaultMaxBody+1), false); got != 413 && got != 403 {
		t.Errorf("POST /api/feedback oversize with an unknown token = %d, want 413 or 403", got)
	}
}

// TestFeedback_DuplicateBatchesAreKeptTwice: the protocol gives a batch no
// id, and two equal batches of counts are two periods' counts, so a batch
// sent twice is kept twice, under two ids.
func TestFeedback_DuplicateBatchesAreKeptTwice(t *testing.T) {
	br, tok := consenting(t, "passive")
	body := []byte(`{"counts":{"restarts":1}}`)
	var ids []int64
	for range 2 {
		resp := br.Do("POST", "/api/feedback", tok, body, nil)
		var got taken
		if resp.StatusCode != 202 || json.Unmarshal(resp.Body, &got) != nil {
			t.Fatalf("POST /api/feedback = %d %s, want 202", resp.StatusCode, resp.Body)
		}
		ids = append(ids, got.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("ids of two batches = %v, want two different", ids)
	}
	if fb := kept(t, br, "alpha"); len(fb) != 2 || !bytes.Equal(fb[0].Body, fb[1].Body) {
		t.Errorf("ListFeedback(alpha) = %d batches, want the same batch twice", len(fb))
	}
}

func TestFeedback_OtherRoutesAreNotServed(t *testing.T) {
	br, tok := consenting(t, "agent")
	tests := []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/feedback", http.StatusMethodNotAllowed},
		{"PUT", "/api/feedback", http.StatusMethodNotAllowed},
		{"POST", "/api/feedback/", http.StatusNotFound},
		{"POST", "/api/feedback/batch", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp := br.Do(tt.method, tt.path, tok, []byte(`{"entries":[{}]}`), nil)
			if resp.StatusCode != tt.status {
				t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, resp.Body, tt.status)
			}
			if tt.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("%s %s: Allow %q, want POST", tt.method, tt.path, resp.Header.Get("Allow"))
			}
		})
	}
	if fb := kept(t, br, "alpha"); len(fb) != 0 {
		t.Errorf("ListFeedback(alpha) = %d batches, want 0", len(fb))
	}
}

func TestFeedback_UnknownTokenIsRefused(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	for _, token := range []string{"", "bbx_not-a-box"} {
		resp := br.Do("POST", "/api/feedback", token, []byte(`{"entries":[{}]}`), nil)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /api/feedback with token %q = %d, want 403", token, resp.StatusCode)
		}
	}
}

// TestFeedback_NeverEndingBody: a batch whose chunked body never ends,
// from a box, is cut off at the broker's body timeout rather than holding
// its handler forever. (One from a client with no box's token is refused
// before a byte of it is read: TestFeedback_UnauthenticatedBodyIsNeverRead
// in internal/broker.)
func TestFeedback_NeverEndingBody(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the body timeout")
	}
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	br.Report(tok, brokertest.Entry("feedback", "agent"))
	c, err := net.Dial("tcp", strings.TrimPrefix(br.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/feedback HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", tok)
	_ = c.SetReadDeadline(time.Now().Add(broker.BodyTimeout + 10*time.Second)) // a deadlock guard
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a never-ending batch: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("never-ending batch = %d, want 400", resp.StatusCode)
	}
}

// TestFeedback_TokenInABatchIsNeverKept: a batch that holds tokens (the
// box's own, another box's, a grant, plainly or JSON-escaped) is kept
// with each replaced by a marker of its length, so the stored batch is
// the same JSON with no token in it.
func TestFeedback_TokenInABatchIsNeverKept(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	tok := br.AddBox("alpha")
	other := br.AddBox("beta")
	grant, err := token.NewGrant()
	if err != nil {
		t.Fatal(err)
	}
	br.Report(tok, brokertest.Entry("feedback", "agent", "passive"))
	setConsent(t, br, "alpha", true)
	escaped := `\u0062` + other[1:]
	body := `{"entries":[{"note":"mine ` + tok + `, theirs ` + escaped + `","grant":"` + grant + `"}]}`
	resp := br.Do("POST", "/api/feedback", tok, []byte(body), nil)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/feedback = %d %s, want 202", resp.StatusCode, resp.Body)
	}
	fb := kept(t, br, "alpha")
	if len(fb) != 1 {
		t.Fatalf("ListFeedback(alpha) = %d batches, want 1", len(fb))
	}
	got := string(fb[0].Body)
	for _, s := range []string{tok, other, escaped, grant} {
		if strings.Contains(got, s) {
			t.Errorf("the kept batch holds a token: %s", got)
		}
	}
	if len(got) != len(body) || !json.Valid(fb[0].Body) || strings.Count(got, "[token-removed") != 3 {
		t.Errorf("kept batch = %s, want the batch with three markers of the tokens' lengths", got)
	}
}

// TestFeedback_EntriesOrCountsInAnotherCaseAreJudgedAsThem: a box whose
// declaration lists passive alone sends its entries under "Entries" (or
// "ENTRIES", or with a long s) beside its counts. The rule read only "entries", so the
// batch was judged to need passive alone and kept; a receiver that
// matches names regardless of case, as encoding/json does, reads the
// entries. A member whose name is entries or counts in any case is read
// as it: judged by the widest reading, and given twice is a 400.
func TestFeedback_EntriesOrCountsInAnotherCaseAreJudgedAsThem(t *testing.T) {
	br := brokertest.New(t, brokertest.Options{})
	agentOnly := br.AddBox("agent-only")
	passiveOnly := br.AddBox("passive-only")
	br.Report(agentOnly, brokertest.Entry("feedback", "agent"))
	br.Report(passiveOnly, brokertest.Entry("feedback", "passive"))
	for _, name := range []string{"agent-only", "passive-only"} {
		setConsent(t, br, name, true)
	}
	tests := []struct {
		name, token, body string
		status            int
		word              string
	}{
		{"Entries beside counts, passive alone", passiveOnly, `{"counts":{"a":1},"Entries":[{"note":"n"}]}`, http.StatusForbidden, "agent"},
		{"ENTRIES alone, passive alone", passiveOnly, `{"ENTRIES":[{"note":"n"}]}`, http.StatusForbidden, "agent"},
		{"entrieſ (a long s, which encoding/json folds to s), passive alone", passiveOnly, `{"counts":{"a":1},"entrieſ":[{}]}`, http.StatusForbidden, "agent"},
		{"Counts beside entries, agent alone", agentOnly, `{"entries":[{}],"Counts":{"a":1}}`, http.StatusForbidden, "passive"},
		{"entries and Entries", agentOnly, `{"entries":[{}],"Entries":[{}]}`, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := br.Do("POST", "/api/feedback", tt.token, []byte(tt.body), nil)
			_, msg := brokertest.Refusal(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(msg, tt.word) {
				t.Errorf("POST /api/feedback %s = %d %q, want %d naming %q", tt.body, resp.StatusCode, msg, tt.status, tt.word)
			}
		})
	}
	for _, name := range []string{"agent-only", "passive-only"} {
		if fb := kept(t, br, name); len(fb) != 0 {
			t.Errorf("ListFeedback(%s) = %d batches after refusals, want 0", name, len(fb))
		}
	}
}

// TestFeedback_TokenAfterAnEscapedBackslashKeepsTheBatchJSON: a batch
// whose text holds a backslash and then a token with its first letter
// JSON-escaped (`\\\u0062bx_…`, a path on Windows written by an encoder
// that escapes letters). The token's replacement began at the backslash
// that closes the escaped backslash, as if the token were escaped twice,
// and left the one before it to escape the marker's "[": the batch was
// kept as what is no JSON, which the receiver cannot read. The marker
// takes the token as JSON reads it, and the kept batch is JSON.
func TestFeedback_TokenAfterAnEscapedBackslashKeepsTheBatchJSON(t *testing.T) {
	br, tok := consenting(t, "agent")
	tests := []struct {
		name, written string
	}{
		{"one backslash before", `C:\\\u0062` + tok[1:]},
		{"two backslashes before", `C:\\\\\\\u0062` + tok[1:]},
		{"its separator escaped too", `C:\\\u0062bx\u005f` + tok[4:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"entries":[{"note":"` + tt.written + `"}]}`
			if !json.Valid([]byte(body)) {
				t.Fatalf("the test is wrong: %s is no JSON", body)
			}
			resp := br.Do("POST", "/api/feedback", tok, []byte(body), nil)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST /api/feedback = %d %s, want 202", resp.StatusCode, resp.Body)
			}
			fb := kept(t, br, "alpha")
			got := fb[len(fb)-1].Body
			var v struct {
				Entries []struct{ Note string } `json:"entries"`
			}
			if json.Unmarshal(got, &v) != nil || len(v.Entries) != 1 || strings.Contains(v.Entries[0].Note, tok[4:]) {
				t.Errorf("kept batch = %s, want JSON with the token replaced", got)
			}
		})
	}
}
