package conformance

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
)

// decideModel is the model the decide checks ask for.
const decideModel = "claude-conformance-decide"

// decideQuestions are the questions decide-answers asks, one of each type.
var decideQuestions = map[string]string{"queue": "choice", "urgent": "noul", "quality": "score"}

// decideBody is a decide request asking a choice, a noul and a score.
func decideBody() []byte {
	return mustJSON(map[string]any{
		"model": decideModel,
		"state": map[string]any{"ticket": "The checkout button hides on phones, and customers cannot pay."},
		"questions": map[string]any{
			"queue":   map[string]any{"type": "choice", "instructions": "Which queue takes this ticket?", "criteria": map[string]any{"billing": "money and invoices", "support": "anything else"}},
			"urgent":  map[string]any{"type": "noul", "instructions": "How urgent is this ticket?", "criteria": map[string]any{"urgent": "customers cannot pay"}},
			"quality": map[string]any{"type": "score", "instructions": "How clear is the report?", "criteria": map[string]any{"1": "unclear", "5": "clear"}},
		},
	})
}

func decideAnswers(c *checkRun) {
	c.report(entry{"inference", []string{"decide"}})
	r := c.do(decideRequest(c.s.tokenA, decideBody()))
	asked := 0
	for _, e := range c.onlyTo(upstreamAnthropic) {
		c.tokenFree(e)
		cred := c.s.env.Anthropic.Credential
		if e.Method == http.MethodPost && e.Path == "/v1/messages" &&
			(e.Header.Get("X-Api-Key") == cred || e.Header.Get("Authorization") == "Bearer "+cred) {
			asked++
		}
	}
	if asked == 0 {
		c.fail("the Anthropic stand-in received no Messages request on the credential: the broker answered without asking the model")
	}
	if !c.status(r, http.StatusOK) {
		return
	}
	if p := c.s.validator.validate("decideResponse", r.Body); p != "" {
		c.fail("the answer %s (%s)", p, brief(r.Body))
		return
	}
	var resp struct {
		Model   string `json:"model"`
		Answers map[string]struct {
			Type string `json:"type"`
		} `json:"answers"`
	}
	_ = json.Unmarshal(r.Body, &resp)
	if resp.Model != decideModel {
		c.fail("the answer names the model %q, want %q, the one asked", resp.Model, decideModel)
	}
	for _, name := range slices.Sorted(maps.Keys(decideQuestions)) {
		typ := decideQuestions[name]
		a, ok := resp.Answers[name]
		switch {
		case !ok:
			c.fail("no answer to the %s question %q", typ, name)
		case a.Type != typ && a.Type != "unsupported":
			c.fail("the answer to the %s question %q is of type %q, want %q or unsupported", typ, name, a.Type, typ)
		}
	}
	for name := range resp.Answers {
		if _, ok := decideQuestions[name]; !ok {
			c.fail("an answer to %q, which was not asked", name)
		}
	}
}

// --- egress ---

func egressForwards(c *checkRun) {
	c.report(entry{"egress", []string{SecretName}})
	secret := c.s.env.Secrets[0]
	r := c.do(Probe{Method: http.MethodGet, Path: "/egress/" + SecretName + "/some/path?x=1", Header: bearer(c.s.tokenA)})
	got := c.onlyTo(upstreamEcho)
	if len(got) == 0 {
		c.fail("the secret's host received nothing")
	}
	for _, e := range got {
		c.tokenFree(e)
		if e.Path != "/some/path" || e.RawQuery != "x=1" {
			c.fail("the secret's host received %s?%s, want /some/path?x=1", e.Path, e.RawQuery)
		}
		if a := e.Header.Get("Authorization"); a != "Bearer "+secret.Value {
			c.fail("the secret's host received Authorization %q, want the secret's value in place of the token", redact(a))
		}
	}
	if !c.status(r, http.StatusOK) {
		return
	}
	if a := r.Header.Get("X-Echo-Authorization"); a != "Bearer "+c.s.tokenA {
		c.fail("the answer's X-Echo-Authorization is %q, want the value swapped back for the token", redact(a))
	}
}

// --- feedback ---

func feedbackTaken(c *checkRun) {
	c.report(entry{"feedback", []string{"agent"}})
	r := c.do(feedbackRequest(c.s.tokenA, `{"entries":[{"note":"The conformance suite was here."}]}`))
	if r == nil {
		return
	}
	switch {
	case r.Status >= 200 && r.Status < 300, r.Status == http.StatusNotImplemented:
	case r.Status == http.StatusForbidden:
		if msg := message(r.Body); isDeclarationRefusal(msg) {
			c.fail("a batch of entries with agent declared is refused by the declaration: %q", msg)
		}
	default:
		c.fail("a batch of entries with agent declared is %d, want 2xx, 501, or a 403 of the broker's own policy (%s)", r.Status, brief(r.Body))
	}
}

// --- fountain ---

func fountainForwards(c *checkRun) {
	c.report(entry{"fountain", []string{"conversations"}})
	r := c.do(Probe{Method: http.MethodGet, Path: "/fountain/api/conversations", Header: bearer(c.s.tokenA)})
	got := c.onlyTo(upstreamFountain)
	if len(got) == 0 {
		c.fail("the Fountain stand-in received nothing")
	}
	for _, e := range got {
		c.tokenFree(e)
		if e.Path != "/api/conversations" {
			c.fail("the Fountain stand-in received %s %s, want GET /api/conversations", e.Method, e.Path)
		}
		if a := e.Header.Get("Authorization"); a != "Bearer "+c.s.env.Fountain.Credential {
			c.fail("the Fountain stand-in received Authorization %q, want the operator's key as the bearer", redact(a))
		}
	}
	if r != nil && (r.Status < 200 || r.Status >= 300) {
		c.fail("%s is %d, want Fountain's 2xx (%s)", r.what, r.Status, brief(r.Body))
	}
}
