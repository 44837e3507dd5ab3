package decide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
)

// AnthropicVersion is the anthropic-version every Messages call sends.
const AnthropicVersion = "2023-06-01"

// upstreamName names the upstream in refusal messages.
const upstreamName = "Anthropic API"

// system is the system prompt of every question.
const system = "You answer one question for an automated decision point. " +
	"Judge only from the instructions, the criteria and the state you are given. " +
	"Answer in the JSON form asked for, and say in reason, briefly, why."

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// ordered is a JSON object whose members keep their order: a structured
// output is generated in its schema's property order, so reason comes
// before the answer it explains.
type ordered []kv

func (o ordered) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := marshal(m.k)
		if err != nil {
			return nil, err
		}
		v, err := marshal(m.v)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func objectSchema(props ordered) ordered {
	required := make([]string, len(props))
	for i, p := range props {
		required[i] = p.k
	}
	return ordered{
		{"type", "object"},
		{"properties", props},
		{"required", required},
		{"additionalProperties", false},
	}
}

func described(typ, description string) ordered {
	return ordered{{"type", typ}, {"description", description}}
}

// schema returns the JSON Schema of the structured output asked for q, and
// what the prompt asks the model to give. The schema uses only what the
// Anthropic API's structured outputs accept: bounds on numbers are said in
// descriptions and enforced on the answer.
func schemaOf(q *Question) (schema ordered, ask string) {
	reason := kv{"reason", described("string", "Why, briefly.")}
	confidence := kv{"confidence", described("number", "How sure you are of your answer, from 0 to 1.")}
	switch q.Type {
	case TypeChoice:
		probs := make(ordered, len(q.Options))
		quoted := make([]string, len(q.Options))
		for i, o := range q.Options {
			probs[i] = kv{o, described("number", "The probability, from 0 to 1, that this option is the right choice.")}
			b, _ := marshal(o)
			quoted[i] = string(b)
		}
		return objectSchema(ordered{
				reason,
				{"probabilities", objectSchema(probs)},
				{"choice", ordered{{"type", "string"}, {"enum", q.Options}, {"description", "The option you choose."}}},
				confidence,
			}), "Choose exactly one of the options " + strings.Join(quoted, ", ") + ". Give each option's probability of being the right choice " +
				"(from 0 to 1, summing to 1), your choice, your confidence in it from 0 to 1, and a short reason."
	case TypeNoul:
		return objectSchema(ordered{
			reason,
			{"noul", described("number", "The probability, from 0 to 1, that the answer is yes.")},
		}), "Answer yes or no as the probability, from 0 to 1, that the answer is yes, with a short reason."
	case TypeScore:
		return objectSchema(ordered{
			reason,
			{"score", described("number", "The score, as the instructions and criteria describe it.")},
			confidence,
		}), "Give a score as the instructions and criteria describe it, your confidence in it from 0 to 1, and a short reason."
	}
	return nil, ""
}

// prompt lays out q's instructions and criteria and state, the request's
// state as indent lays it out, for the model.
func prompt(q *Question, state, ask string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<instructions>\n%s\n</instructions>\n\n", q.Instructions)
	fmt.Fprintf(&b, "<criteria>\n%s\n</criteria>\n\n", indent(q.Criteria))
	fmt.Fprintf(&b, "<state>\n%s\n</state>\n\n", state)
	b.WriteString(ask)
	return b.String()
}

// indent is raw indented two spaces a level, for the model to read; or
// raw as it came when indenting would make it more than twice as long
// (and 4 KiB): each line carries its depth in spaces, so a few thousand
// nested arrays would grow to tens of megabytes, asked on the payer's
// credential for each question, far past what the body's size reserved.
func indent(raw json.RawMessage) string {
	if indentedLen(raw) > 2*len(raw)+4<<10 {
		return string(raw)
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// indentedLen is the length of raw indented two spaces a level, as
// json.Indent writes it: a line break and its depth's spaces before each
// member and item and each closing bracket of a container that holds
// any, and a space after each colon, beside raw's own characters but
// its spaces. For raw that is not JSON, it is len(raw).
func indentedLen(raw json.RawMessage) int {
	type level struct {
		object, key, empty bool // key: the next token is a member's name
	}
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return len(raw)
	}
	dec := json.NewDecoder(&compact)
	n := compact.Len()
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		depth := len(stack)
		if depth > 0 {
			top := &stack[depth-1]
			switch {
			case tok == json.Delim(']') || tok == json.Delim('}'):
			case top.object && top.key:
				n += 1 + 2*depth + 1 // the line, and the space after the colon
				top.key, top.empty = false, false
				continue
			case !top.object:
				n += 1 + 2*depth
				top.empty = false
			default:
				top.key = true // a member's value, on its name's line
			}
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			stack = append(stack, level{object: tok == json.Delim('{'), key: true, empty: true})
		case json.Delim(']'), json.Delim('}'):
			if !stack[depth-1].empty {
				n += 1 + 2*(depth-1)
			}
			stack = stack[:depth-1]
		}
	}
}

// body is the Messages call that asks q.
func messagesBody(req *Request, q *Question, maxTokens int) ([]byte, error) {
	return questionBody(req, q, maxTokens, indent(req.State))
}

// questionBody is the Messages call that asks q, with state (the
// request's, as indent lays it out) in its prompt. Its length is that of
// the body with no state and state's as a JSON string's content: JSON
// escapes each character of a string alone, and the text around state
// is ASCII.
func questionBody(req *Request, q *Question, maxTokens int, state string) ([]byte, error) {
	schema, ask := schemaOf(q)
	if schema == nil {
		return nil, fmt.Errorf("question type %q is not asked", q.Type)
	}
	return marshal(ordered{
		{"model", req.Model},
		{"max_tokens", maxTokens},
		{"system", system},
		{"messages", []ordered{{{"role", "user"}, {"content", prompt(q, state, ask)}}}},
		{"output_config", ordered{{"format", ordered{{"type", "json_schema"}, {"schema", schema}}}}},
	})
}

// ask asks the model q and reads its answer. When the operator's pool
// pays and the entry refuses the question, it is asked again on the next
// healthy entry, at most once per entry.
func (c *Capability) ask(ctx context.Context, req *Request, q *Question, pay *paying) (Answer, Usage, error) {
	body, err := messagesBody(req, q, c.cfg.MaxTokens)
	if err != nil {
		return Answer{}, Usage{}, err
	}
	for tries := 0; ; tries++ {
		cred, u, entry, earlier := pay.now()
		pctx := ctx
		if entry != "" {
			pctx = proxy.WithEntry(ctx, entry)
		}
		if earlier != nil {
			// The meter beneath keeps the answer's model: it is told
			// of every key the question was asked on.
			pctx = proxy.WithEarlier(pctx, earlier)
		}
		status, h, raw, err := c.post(pctx, u, cred, body)
		if err != nil {
			if entry != "" {
				// The log line names the entry whose URL failed.
				err = fmt.Errorf("pool entry %s: %w", entry, err)
			}
			return Answer{}, Usage{}, c.failed(ctx, q, err)
		}
		if status < 200 || status > 299 {
			if tries < maxTries && pay.again(entry, status, h, raw) {
				continue
			}
			return Answer{}, Usage{}, upstreamStatus(q, status, raw)
		}
		pay.answered(entry, status, h)
		if int64(len(raw)) > MaxAnswer {
			return Answer{}, Usage{}, badOutput(q, fmt.Sprintf("its answer is over %d bytes", MaxAnswer), nil)
		}
		text, usage, err := messageText(q, raw)
		if err != nil {
			return Answer{}, Usage{}, err
		}
		text = pay.mask(text)
		a, err := read(q, text)
		return a, usage, err
	}
}

// maxTries bounds how many times one question is asked again on another
// entry of the pool.
const maxTries = 8

// post makes one Messages call and reads its answer, bounded.
func (c *Capability) post(ctx context.Context, u string, cred, body []byte) (int, http.Header, []byte, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("build Messages request: %w", err)
	}
	if cloud.Is(cred) {
		// A pool's failover reached a cloud account: never sent to the
		// Anthropic API.
		return 0, nil, nil, notOnCloud(cred)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Anthropic-Version", AnthropicVersion)
	proxy.SetAnthropicCredential(hr.Header, cred)
	resp, err := c.client.Do(hr)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// failed turns a transport error into the refusal for it: 504 when the
// request's time ran out or the upstream did not answer in time, 502
// otherwise. When the request was stopped because another question
// failed (or the box left), the error is not the request's answer.
func (c *Capability) failed(ctx context.Context, q *Question, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return capability.Refuse(capability.ReasonTimeout, "The %s did not answer question %s within %s.", upstreamName, short(q.ID), c.cfg.Timeout).WithErr(err)
	case ctx.Err() != nil:
		return fmt.Errorf("question %s stopped: %w", short(q.ID), err)
	}
	ce := proxy.Classify(err, upstreamName)
	ce.Message += " Question " + short(q.ID) + " has no answer."
	return ce
}

// apiErrorTypes are the error types the Anthropic API gives: the only
// ones a refusal names. An upstream's own type is not quoted, however
// plain it reads: an upstream (a gateway the operator's key is for) may
// answer with the credential it was sent as its type, and a key may be
// written in lower-case letters and "_" as a type is.
var apiErrorTypes = []string{
	protocol.TypeInvalid, protocol.TypeAuthn, "billing_error", protocol.TypePermission,
	protocol.TypeNotFound, protocol.TypeTooLarge, protocol.TypeRateLimit, protocol.TypeAPI,
	protocol.TypeTimeout, protocol.TypeOverloaded,
}

// upstreamStatus is the 502 for an upstream's error answer: its status and
// its error type when it is one of the API's, never its body, which could
// say anything.
func upstreamStatus(q *Question, status int, raw []byte) error {
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	what := fmt.Sprintf("%d %s", status, http.StatusText(status))
	if json.Unmarshal(raw, &e) == nil && slices.Contains(apiErrorTypes, e.Error.Type) {
		what += " (" + e.Error.Type + ")"
	}
	return capability.Refuse(capability.ReasonUpstream, "The %s answered question %s with %s.", upstreamName, short(q.ID), what).WithErr(fmt.Errorf("upstream status %d", status))
}

func badOutput(q *Question, what string, err error) error {
	return capability.Refuse(capability.ReasonUpstream, "The model's answer to question %s is not the JSON asked for: %s.", short(q.ID), what).WithErr(err)
}

// messageText reads a Messages answer: its first text block and its usage.
func messageText(q *Question, raw []byte) (string, Usage, error) {
	var m struct {
		Type    string `json:"type"`
		Content []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      Usage  `json:"usage"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.Content == nil {
		return "", Usage{}, badOutput(q, "the "+upstreamName+"'s answer is not a message", err)
	}
	switch m.StopReason {
	case "refusal":
		return "", m.Usage, badOutput(q, "the model declined to answer", nil)
	case "max_tokens":
		return "", m.Usage, badOutput(q, "the model's answer was cut off at max_tokens", nil)
	}
	for _, b := range m.Content {
		if b.Type == "text" && b.Text != nil {
			return *b.Text, m.Usage, nil
		}
	}
	return "", m.Usage, badOutput(q, "the message holds no text", nil)
}

// read reads the model's JSON for q into an answer, holding it to what
// was asked: a choice among the options, probabilities for each, numbers
// that are numbers. Probabilities are normalised to sum to 1, and
// confidence and noul are clamped to [0, 1].
func read(q *Question, text string) (Answer, error) {
	var out struct {
		Reason        *string             `json:"reason"`
		Choice        *string             `json:"choice"`
		Probabilities map[string]*float64 `json:"probabilities"`
		Confidence    *float64            `json:"confidence"`
		Noul          *float64            `json:"noul"`
		Score         *float64            `json:"score"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	if err := dec.Decode(&out); err != nil {
		return Answer{}, badOutput(q, "it is not a JSON object of the form asked", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Answer{}, badOutput(q, "it holds more than one JSON value", nil)
	}
	a := Answer{Type: q.Type}
	if out.Reason != nil && strings.TrimSpace(*out.Reason) != "" {
		a.Reason = *out.Reason
	}
	switch q.Type {
	case TypeChoice:
		if out.Choice == nil {
			return Answer{}, badOutput(q, "it gives no choice", nil)
		}
		if !slices.Contains(q.Options, *out.Choice) {
			return Answer{}, badOutput(q, fmt.Sprintf("it chose %s, which is not one of the options", short(*out.Choice)), nil)
		}
		a.Choice = *out.Choice
		if out.Probabilities == nil {
			return Answer{}, badOutput(q, "it gives no probabilities", nil)
		}
		a.Probabilities = make(map[string]float64, len(q.Options))
		sum := 0.0
		for _, o := range q.Options {
			p := out.Probabilities[o]
			if p == nil {
				return Answer{}, badOutput(q, fmt.Sprintf("it gives no probability for option %s", short(o)), nil)
			}
			v := math.Max(*p, 0)
			a.Probabilities[o] = v
			sum += v
		}
		if !(sum > 0) || math.IsInf(sum, 0) {
			return Answer{}, badOutput(q, "its probabilities do not sum to more than zero", nil)
		}
		for o, v := range a.Probabilities {
			a.Probabilities[o] = v / sum
		}
		if out.Confidence == nil {
			return Answer{}, badOutput(q, "it gives no confidence", nil)
		}
		a.Confidence = clamp(*out.Confidence)
	case TypeNoul:
		if out.Noul == nil {
			return Answer{}, badOutput(q, "it gives no noul", nil)
		}
		a.Noul = clamp(*out.Noul)
	case TypeScore:
		if out.Score == nil {
			return Answer{}, badOutput(q, "it gives no score", nil)
		}
		s := *out.Score
		a.Score = &s
		if out.Confidence != nil {
			a.Confidence = clamp(*out.Confidence)
		}
	}
	return a, nil
}

func clamp(v float64) *float64 {
	v = math.Min(math.Max(v, 0), 1)
	return &v
}
