package approval_test

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// Receiver is a loopback webhook receiver that checks each request's
// signature as docs/approvals.md tells a receiver to, and answers the
// first fail requests 503.
type receiver struct {
	t    *testing.T
	key  []byte
	fail int

	mu     sync.Mutex
	tries  int
	bodies [][]byte
	got    chan struct{}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	ts := r.Header.Get(webhook.HeaderTimestamp)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		rc.t.Errorf("webhook timestamp %q is not now", ts)
	}
	if want := webhook.Sign(rc.key, ts, body); !hmac.Equal([]byte(r.Header.Get(webhook.HeaderSignature)), []byte(want)) {
		rc.t.Errorf("webhook signature %q, want %q", r.Header.Get(webhook.HeaderSignature), want)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.tries++
	if rc.tries <= rc.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	rc.bodies = append(rc.bodies, body)
	rc.got <- struct{}{}
}

// TestWebhook_SignedRetriedNoSecret: a new proposal is POSTed, signed
// (the receiver checks the HMAC over timestamp and body), retried after
// the receiver's 503s, in the JSON shape and in Slack's, and carries no
// secret or token.
func TestWebhook_SignedRetriedNoSecret(t *testing.T) {
	for _, shape := range []string{approval.ShapeJSON, approval.ShapeSlack} {
		t.Run(shape, func(t *testing.T) {
			rc := &receiver{t: t, key: []byte("whsec_test_key_0123456789"), fail: 2, got: make(chan struct{}, 4)}
			srv := httptest.NewServer(rc)
			t.Cleanup(srv.Close)
			wh, err := approval.NewWebhook(approval.WebhookConfig{Shape: shape, PageURL: "https://broker.example/ui/",
				Config: webhook.Config{URL: srv.URL, Key: rc.key, Backoff: time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { wh.Close() })
			p := store.Proposal{ID: "p-0123456789ab", Attempt: store.Attempt{Box: "alpha", Kind: store.ProposalRule, Secret: "GITHUB", Method: "POST",
				Path: "/repos/acme/x/issues", Host: "https://api.github.com", Reason: "outside its rules"}, ExpiresAt: time.Now().Add(time.Hour)}
			wh.Notify(p)
			select {
			case <-rc.got:
			case <-time.After(30 * time.Second):
				t.Fatal("the webhook never delivered")
			}
			rc.mu.Lock()
			defer rc.mu.Unlock()
			if rc.tries != 3 {
				t.Errorf("tries = %d, want 3 (two 503s, then delivered)", rc.tries)
			}
			body := string(rc.bodies[0])
			for _, w := range []string{"p-0123456789ab", "alpha", "boxbroker approve p-0123456789ab", "https://broker.example/ui/"} {
				if !strings.Contains(body, w) {
					t.Errorf("body %s does not hold %q", body, w)
				}
			}
			var m map[string]any
			if err := json.Unmarshal(rc.bodies[0], &m); err != nil {
				t.Errorf("body is not JSON: %v", err)
			}
			if _, ok := m["text"]; ok != (shape == approval.ShapeSlack) {
				t.Errorf("body %s: Slack's text field present %v, want %v", body, ok, shape == approval.ShapeSlack)
			}
			if strings.Contains(body, string(rc.key)) {
				t.Errorf("body holds the signing key")
			}
		})
	}
}

// TestMessage_SlackTextHoldsNoMarkupTheBoxWrote: a box shapes the path,
// host, model and reason of its proposal; in a Slack message none of it
// mentions anyone, shows a link under its own words, or leaves the quote
// to write lines of the broker's own.
func TestMessage_SlackTextHoldsNoMarkupTheBoxWrote(t *testing.T) {
	for _, p := range []store.Proposal{
		{ID: "p1", Attempt: store.Attempt{Box: "shop", Kind: store.ProposalRule, Secret: "GITHUB", Method: "GET", Host: "api.github.com",
			Path: "/repos/<!channel>/<https://evil.example|approve>", Reason: "outside <!here>\nApproved by the operator & done"}},
		{ID: "p2", Attempt: store.Attempt{Box: "shop", Kind: store.ProposalHost, Host: "<!channel>.example", Reason: "r"}},
		{ID: "p3", Attempt: store.Attempt{Box: "shop", Kind: store.ProposalBudget, Model: "<https://evil.example|claude>", Amount: 5, Reason: "r"}},
	} {
		var m struct{ Text string }
		if err := json.Unmarshal(approval.Message(p, approval.ShapeSlack, ""), &m); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"<!channel>", "<!here>", "<https://evil", "\nApproved by"} {
			if strings.Contains(m.Text, bad) {
				t.Errorf("%s: the Slack text holds %q as the box wrote it: %q", p.ID, bad, m.Text)
			}
		}
		if p.ID == "p1" && !strings.Contains(m.Text, "&lt;!channel&gt;") {
			t.Errorf("p1: the path is not shown escaped: %q", m.Text)
		}
	}
}
