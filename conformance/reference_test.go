package conformance_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/protocol"
)

// flaw is a rule a broken variant of the reference broker breaks.
type flaw int

const (
	sound               flaw = iota
	grantsEveryScope         // refuses nothing the declaration would refuse
	forwardsToken            // sends the box's token upstream beside the credential
	decidesWithoutModel      // answers decide from a table, never asking the model
	answersWrongType         // answers the score question with a noul
	egressElsewhere          // sends the egress value to the Anthropic upstream
	egressKeepsValue         // leaves the value in the echoed header
	payerDisagrees           // says one payer on the declaration, another in the header
	mergesReports            // adds each report's words to the last's rather than replacing it
)

// calendar is the capability the reference broker adds, served from memory.
var calendar = conformance.Extra{
	Name:   "calendar",
	Prefix: "/calendar/",
	Probes: map[string]conformance.Probe{
		"read":  {Method: http.MethodGet, Path: "/calendar/events"},
		"write": {Method: http.MethodPost, Path: "/calendar/events", Body: []byte(`{"title":"conformance"}`)},
	},
}

// referenceConfig is the suite's configuration for the reference broker,
// or for a variant that breaks one rule.
func referenceConfig(f flaw) conformance.Config {
	return conformance.Config{
		Name:         fmt.Sprintf("the reference broker (flaw %d)", f),
		Start:        startReference(f),
		Capabilities: []string{protocol.Inference, protocol.Egress, protocol.Feedback, protocol.Fountain},
		Extra:        []conformance.Extra{calendar},
	}
}

// startReference is a Config.Start serving the reference broker with f.
func startReference(f flaw) func(context.Context, conformance.Env) (*conformance.Started, error) {
	return func(_ context.Context, env conformance.Env) (*conformance.Started, error) {
		b, err := newReference(env, f)
		if err != nil {
			return nil, err
		}
		srv := httptest.NewServer(b)
		tokens := map[string]string{}
		for token, box := range b.boxes {
			tokens[box] = token
		}
		return &conformance.Started{URL: srv.URL, Tokens: tokens, Close: func() error { srv.Close(); return nil }}, nil
	}
}

// reference is the smallest broker that serves the protocol: all four
// capabilities and calendar, from memory.
type reference struct {
	// transport is the reference's own: http.DefaultTransport's idle
	// connections are closed by every httptest.Server.Close, which races
	// with a request taking one.
	transport *http.Transport
	env       conformance.Env
	flaw      flaw
	boxes     map[string]string // box by token; read-only after newReference
	anthropic *url.URL
	fountain  *url.URL
	client    *http.Client
	payer     protocol.Payer

	mu            sync.Mutex                       // guards the fields below
	declared      map[string]*protocol.Declaration // last report kept, by box
	conversations map[string]map[string]bool       // ids each box started
	feedback      map[string][]json.RawMessage     // batches taken, by box
}

func newReference(env conformance.Env, f flaw) (*reference, error) {
	a, err := url.Parse(env.Anthropic.URL)
	if err != nil {
		return nil, fmt.Errorf("anthropic url: %w", err)
	}
	fo, err := url.Parse(env.Fountain.URL)
	if err != nil {
		return nil, fmt.Errorf("fountain url: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	b := &reference{
		env: env, flaw: f, boxes: map[string]string{}, anthropic: a, fountain: fo,
		transport:     transport,
		client:        &http.Client{Timeout: 30 * time.Second, Transport: transport},
		payer:         protocol.SharedPayer(),
		declared:      map[string]*protocol.Declaration{},
		conversations: map[string]map[string]bool{},
		feedback:      map[string][]json.RawMessage{},
	}
	for _, box := range env.Boxes {
		raw := make([]byte, 24)
		_, _ = rand.Read(raw)
		b.boxes["ref_"+hex.EncodeToString(raw)] = box
	}
	return b, nil
}

func (b *reference) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == protocol.RouteDeclaration:
		b.declaration(w, r)
	case p == protocol.PrefixAnthropic || strings.HasPrefix(p, protocol.PrefixAnthropic+"/"):
		b.inference(w, r, strings.TrimPrefix(p, protocol.PrefixAnthropic))
	case p == protocol.PrefixDecide || strings.HasPrefix(p, protocol.PrefixDecide+"/"):
		b.decide(w, r)
	case p == protocol.PrefixEgress || strings.HasPrefix(p, protocol.PrefixEgress+"/"):
		b.egress(w, r, strings.TrimPrefix(p, protocol.PrefixEgress+"/"))
	case p == protocol.RouteFeedback:
		b.takeFeedback(w, r)
	case p == protocol.PrefixFountain || strings.HasPrefix(p, protocol.PrefixFountain+"/"):
		b.fountainAPI(w, r, strings.TrimPrefix(p, protocol.PrefixFountain))
	case strings.HasPrefix(p, calendar.Prefix):
		b.calendar(w, r, strings.TrimPrefix(p, calendar.Prefix))
	default:
		notFound(w)
	}
}

func notFound(w http.ResponseWriter) {
	protocol.WriteRefusal(w, http.StatusNotFound, protocol.TypeNotFound, "The broker serves no such route.")
}

// box returns the box whose token r carries, as a bearer or, when
// apiKey, as x-api-key too.
func (b *reference) box(r *http.Request, apiKey bool) (box, token string) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok && apiKey {
		token = r.Header.Get("X-Api-Key")
	}
	return b.boxes[token], token
}

// known finds the box whose token r carries, or answers status (a 401,
// or a 403 on the inference routes) itself and returns ok false.
func (b *reference) known(w http.ResponseWriter, r *http.Request, apiKey bool, status int) (box, token string, ok bool) {
	box, token = b.box(r, apiKey)
	if box == "" {
		typ := protocol.TypeAuthn
		if status == http.StatusForbidden {
			typ = protocol.TypePermission
		}
		protocol.WriteRefusal(w, status, typ, "The token is no box's.")
		return "", "", false
	}
	return box, token, true
}

// allowed applies the rule, answering the 403 itself when it refuses.
func (b *reference) allowed(w http.ResponseWriter, box, capability, word string) bool {
	if b.flaw == grantsEveryScope {
		return true
	}
	b.mu.Lock()
	d := b.declared[box]
	b.mu.Unlock()
	if msg := protocol.DeclaredRefusal(d, b.env.Broker, capability, word); msg != "" {
		protocol.WriteRefusal(w, http.StatusForbidden, protocol.TypePermission, msg)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (b *reference) declaration(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		notFound(w)
		return
	}
	box, _, ok := b.known(w, r, false, http.StatusUnauthorized)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, protocol.DeclarationMaxBytes+1))
	if err != nil {
		protocol.WriteRefusal(w, http.StatusRequestEntityTooLarge, protocol.TypeTooLarge, "The report is too large.")
		return
	}
	d, err := protocol.ParseDeclarationReport(body, b.env.Broker)
	if re := (*protocol.ReportError)(nil); errors.As(err, &re) {
		protocol.WriteRefusal(w, re.Status, protocol.TypeInvalid, re.Message)
		return
	}
	d.At = time.Now()
	b.mu.Lock()
	if last := b.declared[box]; b.flaw == mergesReports && last != nil {
		for _, e := range last.Capabilities {
			if kept := d.Find(e.Name, e.Broker); kept != nil {
				for _, w := range e.Scope {
					if !slices.Contains(kept.Scope, w) {
						kept.Scope = append(kept.Scope, w)
					}
				}
			} else {
				d.Capabilities = append(d.Capabilities, e)
			}
		}
	}
	b.declared[box] = d
	b.mu.Unlock()
	payer := b.payer
	if b.flaw == payerDisagrees {
		owner := "github:conformance-owner"
		payer = protocol.Payer{Kind: protocol.PayerOwner, Principal: &owner}
	}
	writeJSON(w, http.StatusOK, protocol.KeptOf(d, &payer))
}

// inferenceRoute reports whether the Anthropic API path rest is one the
// broker forwards.
func inferenceRoute(method, rest string) bool {
	switch {
	case method == http.MethodPost && (rest == "/v1/messages" || rest == "/v1/messages/count_tokens"):
		return true
	case method == http.MethodGet && rest == "/v1/models":
		return true
	case method == http.MethodGet && strings.HasPrefix(rest, "/v1/models/"):
		id := strings.TrimPrefix(rest, "/v1/models/")
		return id != "" && !strings.Contains(id, "/")
	}
	return false
}

func (b *reference) inference(w http.ResponseWriter, r *http.Request, rest string) {
	if rest == "/api/hello" && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if !inferenceRoute(r.Method, rest) {
		notFound(w)
		return
	}
	box, token, ok := b.known(w, r, true, http.StatusForbidden)
	if !ok {
		return
	}
	if !b.allowed(w, box, protocol.Inference, "agent") {
		return
	}
	b.forward(w, r, token, b.anthropic, rest, func(h http.Header) {
		stripBoxAuth(h)
		h.Set("X-Api-Key", b.env.Anthropic.Credential)
	}, func(resp *http.Response) error {
		resp.Header.Set(protocol.HeaderPayer, protocol.FormatPayerHeader(b.payer))
		return nil
	})
}

// stripBoxAuth drops whatever in h could carry the box's own credentials.
func stripBoxAuth(h http.Header) {
	for _, name := range []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization", protocol.HeaderGrant} {
		h.Del(name)
	}
}

// forward proxies r to path on target, the query unchanged; header
// rewrites the outgoing headers and modify the answer's.
func (b *reference) forward(w http.ResponseWriter, r *http.Request, token string, target *url.URL, path string, header func(http.Header), modify func(*http.Response) error) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = target.Scheme, target.Host, target.Host
			pr.Out.URL.Path = strings.TrimSuffix(target.Path, "/") + path
			pr.Out.URL.RawPath = ""
			header(pr.Out.Header)
			if b.flaw == forwardsToken {
				pr.Out.Header.Set("X-Box-Token", token)
			}
		},
		ModifyResponse: modify,
		FlushInterval:  -1,
		Transport:      b.transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			protocol.WriteRefusal(w, http.StatusBadGateway, protocol.TypeAPI, "The upstream cannot be reached.")
		},
	}
	rp.ServeHTTP(w, r)
}

// decideRequest is chant's decide wire format.
type decideRequest struct {
	Model     string                     `json:"model"`
	State     json.RawMessage            `json:"state"`
	Questions map[string]json.RawMessage `json:"questions"`
}

type question struct {
	Type         string          `json:"type"`
	Instructions *string         `json:"instructions"`
	Criteria     json.RawMessage `json:"criteria"`
}

func (b *reference) decide(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != protocol.RouteDecide || r.Method != http.MethodPost {
		notFound(w)
		return
	}
	box, token, ok := b.known(w, r, false, http.StatusForbidden)
	if !ok {
		return
	}
	if !b.allowed(w, box, protocol.Inference, "decide") {
		return
	}
	var req decideRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	qs := map[string]question{}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	for name, raw := range req.Questions {
		var q question
		if err == nil {
			err = json.Unmarshal(raw, &q)
		}
		c := bytes.TrimSpace(q.Criteria)
		if err == nil && (q.Instructions == nil || len(c) == 0 || (c[0] != '{' && c[0] != '[') ||
			(q.Type != "noul" && q.Type != "choice" && q.Type != "score")) {
			err = fmt.Errorf("question %s is not a decide question", name)
		}
		qs[name] = q
	}
	if err != nil || req.Model == "" || len(req.Questions) == 0 {
		protocol.WriteRefusal(w, http.StatusUnprocessableEntity, protocol.TypeInvalid, "The request is not chant's decide format: { model, state, questions }.")
		return
	}
	answers := map[string]any{}
	for name, q := range qs {
		a, err := b.answer(r.Context(), token, req, q)
		if err != nil {
			protocol.WriteRefusal(w, http.StatusBadGateway, protocol.TypeAPI, "The model gave no answer.")
			return
		}
		if b.flaw == answersWrongType && q.Type == "score" {
			a = map[string]any{"type": "noul", "noul": 0.5}
		}
		answers[name] = a
	}
	w.Header().Set(protocol.HeaderPayer, protocol.FormatPayerHeader(b.payer))
	writeJSON(w, http.StatusOK, map[string]any{"model": req.Model, "answers": answers})
}

// answer asks the model q as one structured-output Messages call and maps
// its JSON to a decide answer.
func (b *reference) answer(ctx context.Context, token string, req decideRequest, q question) (map[string]any, error) {
	field, prop := q.Type, map[string]any{"type": "number"}
	var options []string
	switch q.Type {
	case "noul":
		prop = map[string]any{"type": "number", "minimum": 0, "maximum": 1}
	case "choice":
		options = choiceOptions(q.Criteria)
		if len(options) == 0 {
			return map[string]any{"type": "unsupported"}, nil
		}
		prop = map[string]any{"type": "string", "enum": options}
	case "score":
		if lo, hi, ok := scoreBounds(q.Criteria); ok {
			prop = map[string]any{"type": "number", "minimum": lo, "maximum": hi}
		}
	}
	if b.flaw == decidesWithoutModel {
		canned := map[string]any{"noul": 0.5, "choice": firstOr(options), "score": 1}
		return map[string]any{"type": q.Type, field: canned[q.Type]}, nil
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{field: prop, "reason": map[string]any{"type": "string"}},
		"required":             []string{field, "reason"},
		"additionalProperties": false,
	}
	prompt := *q.Instructions + "\n\nCriteria: " + string(q.Criteria) + "\n\nState: " + string(req.State)
	body, _ := json.Marshal(map[string]any{
		"model":         req.Model,
		"max_tokens":    1024,
		"messages":      []any{map[string]any{"role": "user", "content": prompt}},
		"output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}},
	})
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, b.anthropic.JoinPath("/v1/messages").String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Anthropic-Version", "2023-06-01")
	hr.Header.Set("X-Api-Key", b.env.Anthropic.Credential)
	if b.flaw == forwardsToken {
		hr.Header.Set("X-Box-Token", token)
	}
	resp, err := b.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var msg struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the model answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || len(msg.Content) == 0 || msg.Content[0].Type != "text" {
		return nil, errors.New("the model answered no text")
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(msg.Content[0].Text), &out); err != nil {
		return nil, fmt.Errorf("the model answered no JSON: %w", err)
	}
	a := map[string]any{"type": q.Type}
	if reason, ok := out["reason"].(string); ok {
		a["reason"] = reason
	}
	switch v := out[field]; q.Type {
	case "choice":
		s, ok := v.(string)
		if !ok || !slices.Contains(options, s) {
			return nil, errors.New("the model chose no option")
		}
		a["choice"] = s
	default:
		n, ok := v.(float64)
		if !ok || (q.Type == "noul" && (n < 0 || n > 1)) {
			return nil, errors.New("the model gave no number")
		}
		a[field] = n
	}
	return a, nil
}

func firstOr(options []string) string {
	if len(options) == 0 {
		return ""
	}
	return options[0]
}

// choiceOptions are a choice's options: its criteria's keys, or the
// strings of a criteria list.
func choiceOptions(criteria json.RawMessage) []string {
	var byName map[string]any
	if json.Unmarshal(criteria, &byName) == nil {
		out := make([]string, 0, len(byName))
		for k := range byName {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	var list []string
	_ = json.Unmarshal(criteria, &list)
	return list
}

// scoreBounds are the least and greatest numeric keys of a score's
// criteria, when it has two or more.
func scoreBounds(criteria json.RawMessage) (lo, hi float64, ok bool) {
	var byName map[string]any
	if json.Unmarshal(criteria, &byName) != nil {
		return 0, 0, false
	}
	var nums []float64
	for k := range byName {
		if n, err := strconv.ParseFloat(k, 64); err == nil {
			nums = append(nums, n)
		}
	}
	if len(nums) < 2 {
		return 0, 0, false
	}
	return slices.Min(nums), slices.Max(nums), true
}

func (b *reference) egress(w http.ResponseWriter, r *http.Request, rest string) {
	name, path, _ := strings.Cut(rest, "/")
	if !protocol.IsSecretName(name) {
		notFound(w)
		return
	}
	box, token, ok := b.known(w, r, true, http.StatusUnauthorized)
	if !ok {
		return
	}
	if !b.allowed(w, box, protocol.Egress, name) {
		return
	}
	var secret *conformance.Secret
	for i, s := range b.env.Secrets {
		if s.Box == box && s.Name == name {
			secret = &b.env.Secrets[i]
		}
	}
	if secret == nil {
		protocol.WriteRefusal(w, http.StatusForbidden, protocol.TypePermission, "The broker holds no value for the secret "+name+".")
		return
	}
	host, err := url.Parse(secret.Host)
	if err != nil {
		protocol.WriteRefusal(w, http.StatusBadGateway, protocol.TypeAPI, "The secret's host is not a URL.")
		return
	}
	if b.flaw == egressElsewhere {
		host = b.anthropic
	}
	r.URL.RawQuery = strings.ReplaceAll(r.URL.RawQuery, token, url.QueryEscape(secret.Value))
	b.forward(w, r, token, host, "/"+path, func(h http.Header) {
		for _, name := range []string{"Cookie", "Proxy-Authorization", protocol.HeaderGrant} {
			h.Del(name)
		}
		swap(h, token, secret.Value)
	}, func(resp *http.Response) error {
		if b.flaw != egressKeepsValue {
			swap(resp.Header, secret.Value, token)
		}
		return nil
	})
}

// swap replaces from with to in every header value of h.
func swap(h http.Header, from, to string) {
	for _, values := range h {
		for i, v := range values {
			values[i] = strings.ReplaceAll(v, from, to)
		}
	}
}

// feedbackWords are the scope words a feedback batch needs; none for a
// batch that is no batch.
func feedbackWords(body []byte) []string {
	var batch struct {
		Entries json.RawMessage `json:"entries"`
		Counts  json.RawMessage `json:"counts"`
	}
	if json.Unmarshal(body, &batch) != nil {
		return nil
	}
	var words []string
	var entries []json.RawMessage
	if json.Unmarshal(batch.Entries, &entries) == nil && len(entries) > 0 {
		words = append(words, "agent")
	}
	var counts map[string]json.RawMessage
	if json.Unmarshal(batch.Counts, &counts) == nil && len(counts) > 0 {
		words = append(words, "passive")
	}
	return words
}

func (b *reference) takeFeedback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		notFound(w)
		return
	}
	box, _, ok := b.known(w, r, false, http.StatusUnauthorized)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	words := feedbackWords(body)
	if err != nil || len(words) == 0 {
		protocol.WriteRefusal(w, http.StatusBadRequest, protocol.TypeInvalid, "A feedback batch carries entries, counts or both.")
		return
	}
	for _, word := range words {
		if !b.allowed(w, box, protocol.Feedback, word) {
			return
		}
	}
	b.mu.Lock()
	b.feedback[box] = append(b.feedback[box], body)
	b.mu.Unlock()
	writeJSON(w, http.StatusAccepted, map[string]any{"taken": true})
}

// fountainWord is the scope word a Fountain API request needs, or "" for
// a path the broker does not serve.
func fountainWord(method, rest string) string {
	under := func(p string) bool { return rest == p || strings.HasPrefix(rest, p+"/") }
	switch {
	case method == http.MethodPost && rest == "/api/conversations":
		return "agent"
	case under("/api/conversations"):
		return "conversations"
	case under("/api/sandboxes"):
		return "sandboxes"
	case under("/api/vaults"):
		return "vault"
	}
	return ""
}

func (b *reference) fountainAPI(w http.ResponseWriter, r *http.Request, rest string) {
	word := fountainWord(r.Method, rest)
	if word == "" {
		notFound(w)
		return
	}
	box, token, ok := b.known(w, r, false, http.StatusUnauthorized)
	if !ok {
		return
	}
	if !b.allowed(w, box, protocol.Fountain, word) {
		return
	}
	if id, ok := strings.CutPrefix(rest, "/api/conversations/"); ok {
		id, _, _ = strings.Cut(id, "/")
		b.mu.Lock()
		own := b.conversations[box][id]
		b.mu.Unlock()
		if !own {
			protocol.WriteRefusal(w, http.StatusNotFound, protocol.TypeNotFound, "This box started no such conversation.")
			return
		}
	}
	started := word == "agent"
	b.forward(w, r, token, b.fountain, rest, func(h http.Header) {
		stripBoxAuth(h)
		h.Set("Authorization", "Bearer "+b.env.Fountain.Credential)
	}, func(resp *http.Response) error {
		if !started || resp.StatusCode != http.StatusCreated {
			return nil
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var conv struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(body, &conv) == nil && conv.ID != "" {
			b.mu.Lock()
			if b.conversations[box] == nil {
				b.conversations[box] = map[string]bool{}
			}
			b.conversations[box][conv.ID] = true
			b.mu.Unlock()
		}
		return nil
	})
}

func (b *reference) calendar(w http.ResponseWriter, r *http.Request, rest string) {
	word := map[string]string{http.MethodGet: "read", http.MethodPost: "write"}[r.Method]
	if rest != "events" || word == "" {
		notFound(w)
		return
	}
	box, _, ok := b.known(w, r, false, http.StatusUnauthorized)
	if !ok {
		return
	}
	if !b.allowed(w, box, calendar.Name, word) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": []any{}})
}
