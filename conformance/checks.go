package conformance

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// Statuses the checks accept.
var (
	authRefusal = []int{http.StatusUnauthorized, http.StatusForbidden}
	forbidden   = []int{http.StatusForbidden}
	notFound    = []int{http.StatusNotFound}
)

// checks lists every check in the order they run; token-isolation is last.
func (s *suite) checks() []check {
	list := []check{
		{"declaration-kept", "", declarationKept},
		{"declaration-unknown-token", "", declarationUnknownToken},
		{"declaration-malformed", "", declarationMalformed},
		{"declaration-listing-spend", "", declarationListingSpend},
		{"unreported-refused", "", unreportedRefused},
		{"inference-hello", protocol.Inference, inferenceHello},
		{"inference-forwards", protocol.Inference, inferenceForwards},
		{"inference-unknown-route", protocol.Inference, refusal{scope(protocol.Inference, "agent"), notFound, nil, func(a string) []Probe {
			return []Probe{messagesTo("/llm/anthropic/v1/complete", a), messagesTo("/llm/anthropic/v1/messages/batches", a)}
		}}.run},
		{"inference-unknown-token", protocol.Inference, refusal{scope(protocol.Inference, "agent"), forbidden, nil, func(string) []Probe {
			unknown := "conformance-unknown-" + randomHex(16)
			asBearer := messagesTo(messagesPath, "")
			asBearer.Header.Del("X-Api-Key")
			asBearer.Header.Set("Authorization", "Bearer "+unknown)
			return []Probe{messagesTo(messagesPath, unknown), asBearer}
		}}.run},
		{"inference-agent-refused", protocol.Inference, refusal{scope(protocol.Inference, "decide"), forbidden, []string{"inference", "agent"}, func(a string) []Probe {
			return []Probe{messagesTo(messagesPath, a), {http.MethodGet, "/llm/anthropic/v1/models", nil, anthropicHeader(a)}}
		}}.run},
		{"decide-answers", protocol.Inference, decideAnswers},
		{"decide-refused", protocol.Inference, refusal{scope(protocol.Inference, "agent"), forbidden, []string{"inference", "decide"}, func(a string) []Probe {
			return []Probe{decideRequest(a, decideBody())}
		}}.run},
		{"decide-invalid", protocol.Inference, refusal{scope(protocol.Inference, "decide"), []int{http.StatusUnprocessableEntity}, nil, func(a string) []Probe {
			return []Probe{
				decideRequest(a, []byte(`{"model":"`+decideModel+`","state":{},"questions":{}}`)),
				decideRequest(a, []byte(`{"model":"`+decideModel+`","state":{}}`)),
			}
		}}.run},
		{"decide-unknown-token", protocol.Inference, refusal{scope(protocol.Inference, "decide"), authRefusal, nil, func(string) []Probe {
			return []Probe{decideRequest("conformance-unknown-"+randomHex(16), decideBody())}
		}}.run},
		{"egress-forwards", protocol.Egress, egressForwards},
		{"egress-refused", protocol.Egress, refusal{scope(protocol.Egress, SecretName+"_OTHER"), forbidden, []string{"egress", SecretName}, func(a string) []Probe {
			return []Probe{get("/egress/"+SecretName+"/some/path", a)}
		}}.run},
		{"egress-unheld", protocol.Egress, refusal{scope(protocol.Egress, SecretName+"_UNHELD"), forbidden, nil, func(a string) []Probe {
			return []Probe{get("/egress/"+SecretName+"_UNHELD/some/path", a)}
		}}.run},
		{"egress-bad-name", protocol.Egress, refusal{scope(protocol.Egress, SecretName), notFound, nil, func(a string) []Probe {
			return []Probe{get("/egress/not-a-name/some/path", a)}
		}}.run},
		{"feedback-taken", protocol.Feedback, feedbackTaken},
		{"feedback-refused", protocol.Feedback, refusal{scope(protocol.Feedback, "agent"), forbidden, []string{"feedback", "passive"}, func(a string) []Probe {
			return []Probe{feedbackRequest(a, `{"counts":{"conformance":1}}`)}
		}}.run},
		{"feedback-empty", protocol.Feedback, refusal{scope(protocol.Feedback, "agent", "passive"), []int{http.StatusBadRequest}, nil, func(a string) []Probe {
			return []Probe{feedbackRequest(a, `{}`)}
		}}.run},
		{"fountain-forwards", protocol.Fountain, fountainForwards},
		{"fountain-refused", protocol.Fountain, refusal{scope(protocol.Fountain, "agent", "conversations"), forbidden, []string{"fountain", "sandboxes"}, func(a string) []Probe {
			return []Probe{get("/fountain/api/sandboxes", a)}
		}}.run},
		{"payer-consistent", protocol.Inference, payerConsistent},
	}
	for _, x := range s.cfg.Extra {
		for _, word := range slices.Sorted(maps.Keys(x.Probes)) {
			list = append(list, check{"extra-" + x.Name + "-" + word, x.Name, extraCheck(x, word)})
		}
	}
	return append(list, check{"token-isolation", "", tokenIsolation})
}

// anthropicHeader is how the Anthropic SDK sends a box's token.
func anthropicHeader(token string) http.Header {
	return http.Header{
		"X-Api-Key":         {token},
		"Anthropic-Version": {"2023-06-01"},
		"Content-Type":      {"application/json"},
	}
}

// messagesBody is a Messages request, spaced unlike any encoder would
// space it, so that a broker that re-encodes it is caught.
func messagesBody(stream bool) []byte {
	s := ""
	if stream {
		s = `, "stream": true`
	}
	return []byte(`{"model": "` + standInModel + `",  "max_tokens": 64, "messages": [ {"role": "user", "content": "Say hello to the conformance suite."} ]` + s + `}`)
}

// messagesPath is the path of the Messages API through the broker.
const messagesPath = "/llm/anthropic/v1/messages"

// messagesCall is a Messages request with conformance-a's token.
func (c *checkRun) messagesCall(stream bool) *reply {
	r := messagesTo(messagesPath, c.s.tokenA)
	r.Body = messagesBody(stream)
	return c.do(r)
}

// Requests the checks send with token: a Messages call to path as the
// Anthropic SDK sends it, a decide request with body, a feedback post of
// body, and a GET of path with token as the bearer.
func messagesTo(path, token string) Probe {
	return Probe{http.MethodPost, path, messagesBody(false), anthropicHeader(token)}
}

func decideRequest(token string, body []byte) Probe {
	return Probe{http.MethodPost, "/decide/v1/systemone", body, jsonHeader(bearer(token))}
}

func feedbackRequest(token, body string) Probe {
	return Probe{http.MethodPost, "/api/feedback", []byte(body), jsonHeader(bearer(token))}
}

func get(path, token string) Probe {
	return Probe{http.MethodGet, path, nil, bearer(token)}
}

// --- declaration ---

// keptJSON is what the suite reads of a declarationKept answer.
type keptJSON struct {
	Capabilities []protocol.Capability `json:"capabilities"`
	At           string                `json:"at"`
	Payer        json.RawMessage       `json:"payer"`
	Listing      json.RawMessage       `json:"listing"`
	Spend        json.RawMessage       `json:"spend"`
}

// kept validates r against $defs/declarationKept and decodes it.
func (c *checkRun) kept(r *reply) *keptJSON {
	if r == nil {
		return nil
	}
	if p := c.s.validator.validate("declarationKept", r.Body); p != "" {
		c.fail("the answer to a report %s (%s)", p, brief(r.Body))
		return nil
	}
	var k keptJSON
	if err := json.Unmarshal(r.Body, &k); err != nil {
		c.fail("the answer to a report: %v", err)
		return nil
	}
	return &k
}

func declarationKept(c *checkRun) {
	broker := c.s.env.Broker
	elsewhere := "conformance-elsewhere"
	if elsewhere == broker {
		elsewhere += "-2"
	}
	body, _ := json.Marshal(map[string]any{"capabilities": []any{
		map[string]any{"name": "inference", "broker": broker, "scope": []string{"agent"}},
		map[string]any{"name": "egress", "broker": elsewhere, "scope": []string{SecretName}},
		map[string]any{"name": "inference", "broker": broker, "scope": []string{"decide", "agent"}},
		map[string]any{"name": "feedback", "broker": nil, "scope": []string{"agent"}},
		map[string]any{"name": "fountain", "scope": []string{"agent"}},
	}})
	k := c.kept(c.reportRaw(body))
	if k == nil {
		return
	}
	if _, err := time.Parse(time.RFC3339Nano, k.At); err != nil {
		c.fail("the answer's at %q is not an ISO 8601 time", k.At)
	}
	inference := 0
	for _, e := range k.Capabilities {
		switch e.Name {
		case "inference":
			inference++
			if e.Broker != broker {
				c.fail("the kept inference entry names broker %q, want %q", e.Broker, broker)
			}
			if got := slices.Sorted(slices.Values(e.Scope)); !slices.Equal(got, []string{"agent", "decide"}) {
				c.fail("the kept inference scope is %q, want agent and decide, the two entries naming %s merged", e.Scope, broker)
			}
		case "egress":
			c.fail("kept the egress entry, which names the broker %q", elsewhere)
		case "feedback":
			c.fail("kept the feedback entry, whose broker is null")
		case "fountain":
			c.fail("kept the fountain entry, which names no broker")
		default:
			c.fail("kept an entry named %q, which the report did not hold", e.Name)
		}
	}
	if inference != 1 {
		c.fail("kept inference %d times, want once, the two entries naming %s merged", inference, broker)
	}
	c.nothingUpstream()
}

// reportRefused posts a declaration with header and body, which what
// says is wrong, and fails unless its status is one of want and, with
// asRefusal, its body a refusal.
func (c *checkRun) reportRefused(what string, header http.Header, body []byte, want []int, asRefusal bool) {
	r := c.do(Probe{Method: http.MethodPost, Path: "/api/box/declaration", Header: header, Body: body})
	switch {
	case r == nil:
	case !slices.Contains(want, r.Status):
		c.fail("a report with %s is %d, want %s (%s)", what, r.Status, statuses(want), brief(r.Body))
	case asRefusal:
		if p := c.s.validator.validate("refusal", r.Body); p != "" {
			c.fail("the %d to a report with %s %s (%s)", r.Status, what, p, brief(r.Body))
		}
	}
}

func declarationUnknownToken(c *checkRun) {
	body := c.reportBody(entry{"inference", []string{"agent"}})
	c.reportRefused("no token", jsonHeader(http.Header{}), body, authRefusal, false)
	c.reportRefused("an unknown token", jsonHeader(bearer("conformance-unknown-"+randomHex(16))), body, authRefusal, false)
	c.nothingUpstream()
}

func declarationMalformed(c *checkRun) {
	for _, tt := range []struct{ name, body string }{
		{"capabilities that is not a list", `{"capabilities":"x"}`},
		{"a body that is not JSON", `this is not JSON`},
		{"an object with no capabilities", `{}`},
	} {
		c.reportRefused(tt.name, jsonHeader(bearer(c.s.tokenA)), []byte(tt.body), []int{http.StatusBadRequest}, true)
	}
	c.nothingUpstream()
}

func declarationListingSpend(c *checkRun) {
	listing := map[string]any{"published": true, "title": "The conformance box", "line": "A box the broker conformance suite reports, with a listing and a spend."}
	spend := map[string]any{
		"month": time.Now().UTC().Format("2006-01"), "usd": 1.2345, "runs": 3, "unpriced": 1,
		"byPrincipal": []any{
			map[string]any{"principal": "github:conformance", "usd": 1.2345, "runs": 2, "unpriced": 0},
			map[string]any{"principal": nil, "usd": 0, "runs": 1, "unpriced": 1},
		},
	}
	body, _ := json.Marshal(map[string]any{
		"capabilities": []any{map[string]any{"name": "inference", "broker": c.s.env.Broker, "scope": []string{"agent"}}},
		"listing":      listing,
		"spend":        spend,
	})
	k := c.kept(c.reportRaw(body))
	if k == nil {
		return
	}
	for _, f := range []struct {
		name string
		sent any
		got  json.RawMessage
	}{{"listing", listing, k.Listing}, {"spend", spend, k.Spend}} {
		if len(f.got) == 0 || string(f.got) == "null" {
			continue
		}
		if !sameJSON(f.sent, f.got) {
			c.fail("the answer echoes the %s changed: sent %s, got %s", f.name, mustJSON(f.sent), f.got)
		}
	}
	c.nothingUpstream()
}

// sameJSON reports whether v and raw are the same JSON value.
func sameJSON(v any, raw json.RawMessage) bool {
	var a, b any
	if json.Unmarshal(mustJSON(v), &a) != nil || json.Unmarshal(raw, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// --- unreported ---

func unreportedRefused(c *checkRun) {
	tb := c.s.tokenB
	// The probes of each capability the broker serves, each with the
	// scope word it needs: the rule refuses each with a 403 naming the
	// capability and the word, as it refuses a box whose report lacks
	// the word.
	type probe struct {
		capability, word string
		req              Probe
	}
	probes := []probe{
		{protocol.Inference, "agent", messagesTo(messagesPath, tb)},
		{protocol.Inference, "agent", messagesTo(messagesPath+"/count_tokens", tb)},
		{protocol.Inference, "agent", Probe{http.MethodGet, "/llm/anthropic/v1/models", nil, anthropicHeader(tb)}},
		{protocol.Inference, "agent", Probe{http.MethodGet, "/llm/anthropic/v1/models/" + standInModel, nil, anthropicHeader(tb)}},
		{protocol.Inference, "decide", decideRequest(tb, decideBody())},
		{protocol.Egress, SecretName, get("/egress/"+SecretName+"/some/path", tb)},
		{protocol.Feedback, "agent", feedbackRequest(tb, `{"entries":[{"note":"from a box that never reported"}]}`)},
		{protocol.Feedback, "passive", feedbackRequest(tb, `{"counts":{"conformance":1}}`)},
		{protocol.Fountain, "agent", Probe{http.MethodPost, "/fountain/api/conversations", []byte(`{}`), jsonHeader(bearer(tb))}},
		{protocol.Fountain, "conversations", get("/fountain/api/conversations", tb)},
		{protocol.Fountain, "sandboxes", get("/fountain/api/sandboxes", tb)},
		{protocol.Fountain, "vault", get("/fountain/api/vaults", tb)},
	}
	for _, x := range c.s.cfg.Extra {
		for _, word := range slices.Sorted(maps.Keys(x.Probes)) {
			probes = append(probes, probe{x.Name, word, probeRequest(x.Probes[word], tb)})
		}
	}
	for _, p := range probes {
		if c.s.serves[p.capability] {
			c.refused(c.do(p.req), forbidden, p.capability, p.word)
		}
	}
	c.nothingUpstream()
}

// --- inference ---

func inferenceHello(c *checkRun) {
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		c.status(c.do(Probe{Method: method, Path: "/llm/anthropic/api/hello"}), http.StatusOK)
	}
}

func inferenceForwards(c *checkRun) {
	c.report(entry{"inference", []string{"agent"}})
	const beta = "conformance-beta-2026-01-01"
	body := messagesBody(false)
	h := anthropicHeader(c.s.tokenA)
	h.Set("Anthropic-Beta", beta)
	r := c.do(Probe{Method: http.MethodPost, Path: "/llm/anthropic/v1/messages?beta=true", Header: h, Body: body})
	got := c.onlyTo(upstreamAnthropic)
	if len(got) != 1 {
		c.fail("the Anthropic stand-in received %d requests for one Messages call, want 1", len(got))
	}
	for _, e := range got {
		if e.Method != http.MethodPost || e.Path != "/v1/messages" {
			c.fail("the upstream received %s %s, want POST /v1/messages", e.Method, e.Path)
		}
		if e.RawQuery != "beta=true" {
			c.fail("the upstream received the query %q, want %q", e.RawQuery, "beta=true")
		}
		if !bytes.Equal(e.Body, body) {
			c.fail("the upstream received a body that is not the one sent, byte for byte: %s", brief(e.Body))
		}
		if key := e.Header.Get("X-Api-Key"); key != c.s.env.Anthropic.Credential {
			c.fail("the upstream received x-api-key %q, want the credential", redact(key))
		}
		if v := e.Header.Get("Anthropic-Version"); v != "2023-06-01" {
			c.fail("the upstream received anthropic-version %q, want it forwarded as 2023-06-01", v)
		}
		if v := e.Header.Get("Anthropic-Beta"); !strings.Contains(v, beta) {
			c.fail("the upstream received anthropic-beta %q, want it to hold %q", v, beta)
		}
		c.tokenFree(e)
		if r != nil && (r.Status != e.Status || !bytes.Equal(r.Body, e.Answer)) {
			c.fail("the answer is %d %s, want the upstream's %d %s unchanged", r.Status, brief(r.Body), e.Status, brief(e.Answer))
		}
	}

	c.step()
	r = c.messagesCall(true)
	got = c.onlyTo(upstreamAnthropic)
	if len(got) != 1 {
		c.fail("the Anthropic stand-in received %d requests for one streamed Messages call, want 1", len(got))
	}
	for _, e := range got {
		c.tokenFree(e)
		if r == nil {
			continue
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			c.fail("a streamed Messages answer has Content-Type %q, want text/event-stream", ct)
		}
		if r.Status != e.Status || !bytes.Equal(r.Body, e.Answer) {
			c.fail("the streamed answer is %d %s, want the upstream's %d %s unchanged", r.Status, brief(r.Body), e.Status, brief(e.Answer))
		}
	}
}

// --- payer ---

// payerConsistent holds the broker to saying the payer, when it says
// one, in both places and the same in each: on the declaration's answer,
// and in the chant-payer header of each answer from /llm/anthropic (a
// Messages call and a models call) and /decide.
func payerConsistent(c *checkRun) {
	k := c.kept(c.report(entry{"inference", []string{"agent", "decide"}}))
	if k == nil {
		return
	}
	var declared *protocol.Payer
	if len(k.Payer) > 0 && string(k.Payer) != "null" {
		if p := c.s.validator.validate("payer", k.Payer); p != "" {
			c.fail("the declaration's answer has a payer that %s (%s)", p, brief(k.Payer))
			return
		}
		declared = &protocol.Payer{}
		_ = json.Unmarshal(k.Payer, declared)
	}
	for _, a := range []struct {
		what string
		r    *reply
	}{
		{"a Messages answer", c.messagesCall(false)},
		{"a models answer", c.do(Probe{http.MethodGet, "/llm/anthropic/v1/models", nil, anthropicHeader(c.s.tokenA)})},
		{"a decide answer", c.do(decideRequest(c.s.tokenA, decideBody()))},
	} {
		if !c.status(a.r, http.StatusOK) {
			continue
		}
		header, said := a.r.Header.Get(protocol.HeaderPayer), len(a.r.Header.Values(protocol.HeaderPayer)) > 0
		switch {
		case declared == nil && !said:
		case declared == nil:
			c.fail("%s says chant-payer %q, but the declaration's answer says no payer", a.what, header)
		case !said:
			c.fail("the declaration's answer says the payer %s, but %s has no chant-payer header", protocol.FormatPayerHeader(*declared), a.what)
		default:
			p, err := protocol.ParsePayerHeader(header)
			if err != nil {
				c.fail("%s's chant-payer %q is not a payer", a.what, header)
				continue
			}
			if protocol.FormatPayerHeader(p) != protocol.FormatPayerHeader(*declared) {
				c.fail("the declaration's answer says the payer %q, %s's chant-payer %q", protocol.FormatPayerHeader(*declared), a.what, header)
			}
		}
	}
}

// --- extra capabilities ---

// probeRequest is p sent with token as the bearer unless p carries an
// Authorization of its own.
func probeRequest(p Probe, token string) Probe {
	h := http.Header{}
	for k, vs := range p.Header {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	if h.Get("Authorization") == "" {
		h.Set("Authorization", "Bearer "+token)
	}
	p.Header = h
	return p
}

// extraCheck holds the broker to the rule for word of x: without it the
// probe is a 403 naming x and word, with it the declaration lets it pass.
func extraCheck(x Extra, word string) func(c *checkRun) {
	return func(c *checkRun) {
		words := slices.Sorted(maps.Keys(x.Probes))
		probe := probeRequest(x.Probes[word], c.s.tokenA)
		c.report(entry{x.Name, slices.DeleteFunc(slices.Clone(words), func(w string) bool { return w == word })})
		c.refused(c.do(probe), forbidden, x.Name, word)
		c.nothingUpstream()

		c.report(entry{x.Name, words})
		r := c.do(probe)
		if r == nil {
			return
		}
		switch msg := message(r.Body); {
		case r.Status == http.StatusUnauthorized, r.Status == http.StatusNotFound:
			c.fail("%s with %s declared is %d (%s)", r.what, word, r.Status, brief(r.Body))
		case r.Status == http.StatusForbidden && isDeclarationRefusal(msg):
			c.fail("%s with %s declared is refused by the declaration: %q", r.what, word, msg)
		}
	}
}

// --- isolation ---

func tokenIsolation(c *checkRun) {
	for _, e := range c.s.stands.log.since(0) {
		c.tokenFree(e)
	}
	secrets := map[string]string{
		"the Anthropic credential": c.s.env.Anthropic.Credential,
		"the Fountain credential":  c.s.env.Fountain.Credential,
	}
	for _, s := range c.s.env.Secrets {
		secrets["the value of the secret "+s.Name] = s.Value
	}
	for _, r := range c.s.replies {
		d := dump("", r.Header, r.Body)
		for what, secret := range secrets {
			if strings.Contains(d, secret) {
				c.fail("the answer to %s carried %s", r.what, what)
			}
		}
	}
}

// redact shortens a header value that may hold a credential, for a problem.
func redact(v string) string {
	if len(v) <= 16 {
		return v
	}
	return v[:16] + "…"
}
