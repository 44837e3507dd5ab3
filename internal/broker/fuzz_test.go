package broker_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// prefixes are the route prefixes of the standard capabilities, and the
// capability each belongs to.
var prefixes = map[string]string{
	protocol.PrefixAnthropic: protocol.Inference,
	protocol.PrefixDecide:    protocol.Inference,
	protocol.PrefixEgress:    protocol.Egress,
	protocol.RouteFeedback:   protocol.Feedback,
	protocol.PrefixFountain:  protocol.Fountain,
}

// FuzzClassify holds the route classifier — which capability a request
// belongs to and which scope words it needs — to the protocol for any
// method, path and body, with every standard capability served:
//
//   - it never panics, and an error is a refusal with a 4xx status;
//   - a capability is returned exactly when one of the standard prefixes
//     owns the path, and it is that prefix's capability;
//   - inference needs agent (or nothing, publicly, for hello), decide
//     needs decide, only for POST /decide/v1/systemone;
//   - egress needs exactly one word, the path's name segment, and it is
//     a secret's name;
//   - feedback is served for POST /api/feedback only, and needs a subset
//     of [agent passive], in that order;
//   - fountain needs the word of the family the path is in (agent only to
//     start a conversation), and never for a path with a dot segment.
func FuzzClassify(f *testing.F) {
	b := brokertest.New(f, brokertest.Options{Fountain: true})
	for _, s := range []struct{ method, target, body string }{
		{"POST", "/llm/anthropic/v1/messages", `{}`},
		{"HEAD", "/llm/anthropic/api/hello", ``},
		{"GET", "/llm/anthropic/v1/models/claude-x", ``},
		{"GET", "/llm/anthropic/v1/models/a/b", ``},
		{"POST", "/llm/anthropicx/v1/messages", ``},
		{"POST", "/decide/v1/systemone", `{}`},
		{"GET", "/decide/v1/systemone", ``},
		{"GET", "/egress/STRIPE/v1/charges?key=x", ``},
		{"GET", "/egress/stripe/v1", ``},
		{"GET", "/egress/%53TRIPE/v1", ``},
		{"GET", "/egress/STRIPE%2Fx/v1", ``},
		{"PUT", "/egress/A", ``},
		{"POST", "/api/feedback", `{"entries":[{}],"counts":{"x":1}}`},
		{"POST", "/api/feedback", `{"counts":{"x":1},"entries":[{}]}`},
		{"POST", "/api/feedback", `{"entries":[],"entries":[{}]}`},
		{"POST", "/api/feedback/x", `{}`},
		{"POST", "/fountain/api/conversations", `{}`},
		{"GET", "/fountain/api/conversations/c1/messages", ``},
		{"GET", "/fountain/api/sandboxes/../vaults/v", ``},
		{"GET", "/fountain/api/vaults/v1", ``},
		{"GET", "/fountain/api/conversations%2f..", ``},
		{"GET", "/api/box/declaration", ``},
		{"GET", "//egress/STRIPE", ``},
	} {
		f.Add(s.method, s.target, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, method, target string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n") {
			return // net/http's server refuses it before any handler
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{}, Body: http.NoBody, ContentLength: int64(len(body)), Host: "broker"}
		if len(body) > 0 {
			r.Body = readCloser{bytes.NewReader(body)}
		}
		c, need, ok, err := b.Server.Broker.Classify(r)
		owner := ""
		for p, name := range prefixes {
			if capability.Owns(p, u.Path) {
				if owner != "" {
					t.Fatalf("two prefixes own %q", u.Path)
				}
				owner = name
			}
		}
		if c == nil {
			if owner != "" || ok || err != nil {
				t.Fatalf("Classify(%s %q) = no capability, ok %v, err %v; %s owns the path", method, target, ok, err, owner)
			}
			return
		}
		if c.Name() != owner {
			t.Fatalf("Classify(%s %q) = %s, want %q", method, target, c.Name(), owner)
		}
		if err != nil {
			var ce *capability.Error
			if !errors.As(err, &ce) || ce.Status < 400 || ce.Status > 499 || ce.Message == "" {
				t.Fatalf("Classify(%s %q) error %#v is not a 4xx refusal", method, target, err)
			}
			return
		}
		if !ok {
			return
		}
		checkNeed(t, method, u, need)
	})
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// checkNeed holds a served request's words to the protocol's route table.
func checkNeed(t *testing.T, method string, u *url.URL, need capability.Need) {
	t.Helper()
	path, words := u.Path, need.Words
	if need.Public && (len(words) > 0 || path != protocol.PrefixAnthropic+"/api/hello" || (method != "GET" && method != "HEAD")) {
		t.Fatalf("Classify(%s %q) = public %v", method, path, words)
	}
	for _, w := range words {
		if w == "" || len(w) > protocol.MaxScopeWordLen {
			t.Fatalf("Classify(%s %q) words %q", method, path, words)
		}
	}
	is := func(want ...string) bool { return slices.Equal(words, want) }
	switch {
	case capability.Owns(protocol.PrefixAnthropic, path):
		if !need.Public && !is("agent") {
			t.Fatalf("Classify(%s %q) = %q, want [agent]", method, path, words)
		}
	case capability.Owns(protocol.PrefixDecide, path):
		if method != "POST" || path != protocol.RouteDecide || !is("decide") {
			t.Fatalf("Classify(%s %q) = %q, want only POST %s served, needing [decide]", method, path, words, protocol.RouteDecide)
		}
	case capability.Owns(protocol.PrefixEgress, path):
		name, _, _ := strings.Cut(strings.TrimPrefix(path, protocol.PrefixEgress+"/"), "/")
		rawName, _, _ := strings.Cut(strings.TrimPrefix(u.EscapedPath(), protocol.PrefixEgress+"/"), "/")
		if !is(name) || name != rawName || !protocol.IsSecretName(name) {
			t.Fatalf("Classify(%s %q) = %q, want exactly the name segment %q, a secret's name", method, u.EscapedPath(), words, name)
		}
	case capability.Owns(protocol.RouteFeedback, path):
		if method != "POST" || path != protocol.RouteFeedback || !(is() || is("agent") || is("passive") || is("agent", "passive")) {
			t.Fatalf("Classify(%s %q) = %q, want a subset of [agent passive]", method, path, words)
		}
	case capability.Owns(protocol.PrefixFountain, path):
		for _, seg := range strings.Split(path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("Classify(%s %q) served a path with a dot segment", method, path)
			}
		}
		rest := strings.TrimPrefix(path, protocol.PrefixFountain+"/api/")
		family, _, _ := strings.Cut(rest, "/")
		want := map[string]string{"conversations": "conversations", "sandboxes": "sandboxes", "vaults": "vault"}[family]
		if method == "POST" && path == protocol.PrefixFountain+"/api/conversations" {
			want = "agent"
		}
		if want == "" || !is(want) {
			t.Fatalf("Classify(%s %q) = %q, want [%s]", method, path, words, want)
		}
	default:
		t.Fatalf("Classify(%s %q) served a path no standard prefix owns", method, path)
	}
}
