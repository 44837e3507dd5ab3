package decide

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Question types the broker answers; any other is answered unsupported.
const (
	TypeChoice      = "choice"
	TypeNoul        = "noul"
	TypeScore       = "score"
	TypeUnsupported = "unsupported"
)

// Request is a decide request, checked against chant's wire format
// (decideRequest in broker-protocol.schema.json).
type Request struct {
	// Model is the model to ask, as the box named it.
	Model string
	// State is the state the questions are about, as the box sent it
	// (any JSON value, null included).
	State json.RawMessage
	// Questions are in the order the body gives them.
	Questions []Question
}

// Question is one question of a Request.
type Question struct {
	// ID is the question's key in the request's questions.
	ID string
	// Type is "choice", "noul", "score", or a type the broker does not answer.
	Type         string
	Instructions string
	// Criteria is the question's criteria as sent: an object or an array.
	Criteria json.RawMessage
	// Options are a choice question's options, in order: the criteria's
	// keys, or each item's string, or its "name" (else "id"). Nil for
	// other types.
	Options []string
}

// Asked reports whether the broker asks the model this question's type.
func (q *Question) Asked() bool {
	switch q.Type {
	case TypeChoice, TypeNoul, TypeScore:
		return true
	}
	return false
}

// asked is how many of r's questions the broker asks the model.
func (r *Request) asked() int {
	n := 0
	for i := range r.Questions {
		if r.Questions[i].Asked() {
			n++
		}
	}
	return n
}

// InvalidError is a request that is not in the wire format. Message says
// what is wrong and is safe to show the box.
type InvalidError struct {
	Message  string
	TooLarge bool
}

func (e *InvalidError) Error() string { return e.Message }

func invalid(format string, args ...any) error {
	return &InvalidError{Message: fmt.Sprintf(format, args...)}
}

// ParseRequest checks body against chant's decide wire format and returns
// the request, or an *InvalidError saying what is wrong. It refuses a body
// with more than maxQuestions questions (no bound when maxQuestions <= 0).
//
// Beyond the schema it refuses what would make the answer ambiguous: a
// key given twice in an object it reads, a choice question with no
// options, an empty option name, and an option named twice.
func ParseRequest(body []byte, maxQuestions int) (*Request, error) {
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	top, ok, err := members(body, "the decide request")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("The decide request must be a JSON object with model, state and questions, not %s.", kindOf(body))
	}
	req := &Request{}
	model, hasModel := top.get("model")
	switch {
	case !hasModel:
		return nil, invalid(`The decide request has no "model"; name the model to ask.`)
	case json.Unmarshal(model, &req.Model) != nil || !isString(model):
		return nil, invalid(`The decide request's "model" must be a string naming a model, not %s.`, kindOf(model))
	case req.Model == "":
		return nil, invalid(`The decide request's "model" is empty; name the model to ask.`)
	}
	state, hasState := top.get("state")
	if !hasState {
		return nil, invalid(`The decide request has no "state"; send the state its questions are about.`)
	}
	req.State = state
	qs, hasQuestions := top.get("questions")
	if !hasQuestions {
		return nil, invalid(`The decide request has no "questions"; send at least one question.`)
	}
	qm, ok, err := members(qs, `"questions"`)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid(`The decide request's "questions" must be an object of questions by id, not %s.`, kindOf(qs))
	}
	if len(qm) == 0 {
		return nil, invalid(`The decide request's "questions" is empty; send at least one question.`)
	}
	if maxQuestions > 0 && len(qm) > maxQuestions {
		return nil, invalid(`The decide request holds %d questions; the broker answers at most %d in one request.`, len(qm), maxQuestions)
	}
	for _, m := range qm {
		q, err := parseQuestion(m.key, m.value)
		if err != nil {
			return nil, err
		}
		req.Questions = append(req.Questions, q)
	}
	return req, nil
}

func parseQuestion(id string, raw json.RawMessage) (Question, error) {
	q := Question{ID: id}
	name := "Question " + short(id)
	fields, ok, err := members(raw, "question "+short(id))
	if err != nil {
		return q, err
	}
	if !ok {
		return q, invalid("%s must be an object with type, instructions and criteria, not %s.", name, kindOf(raw))
	}
	typ, has := fields.get("type")
	switch {
	case !has:
		return q, invalid(`%s has no "type" (noul, choice or score).`, name)
	case !isString(typ) || json.Unmarshal(typ, &q.Type) != nil:
		return q, invalid(`%s's "type" must be a string (noul, choice or score), not %s.`, name, kindOf(typ))
	case q.Type == "":
		return q, invalid(`%s's "type" is empty (noul, choice or score).`, name)
	}
	instr, has := fields.get("instructions")
	switch {
	case !has:
		return q, invalid(`%s has no "instructions".`, name)
	case !isString(instr) || json.Unmarshal(instr, &q.Instructions) != nil:
		return q, invalid(`%s's "instructions" must be a string, not %s.`, name, kindOf(instr))
	}
	crit, has := fields.get("criteria")
	if !has {
		return q, invalid(`%s has no "criteria" (an object or an array).`, name)
	}
	if k := firstByte(crit); k != '{' && k != '[' {
		return q, invalid(`%s's "criteria" must be an object or an array, not %s.`, name, kindOf(crit))
	}
	q.Criteria = crit
	if q.Type == TypeChoice {
		if q.Options, err = options(name, crit); err != nil {
			return q, err
		}
	}
	return q, nil
}

// options reads a choice question's options from its criteria: the keys of
// an object, or the items of an array, each a string or an object with a
// string "name" (else "id").
func options(name string, crit json.RawMessage) ([]string, error) {
	var opts []string
	if firstByte(crit) == '{' {
		ms, _, err := members(crit, name+"'s criteria")
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			opts = append(opts, m.key)
		}
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(crit, &items); err != nil {
			return nil, invalid(`%s's "criteria" could not be read.`, name)
		}
		for i, it := range items {
			n, ok := optionName(it)
			if !ok {
				return nil, invalid(`%s's criteria item %d is neither a string nor an object with a string "name" or "id".`, name, i)
			}
			opts = append(opts, n)
		}
	}
	if len(opts) == 0 {
		return nil, invalid(`%s is a choice with no options: its "criteria" is empty.`, name)
	}
	seen := make(map[string]bool, len(opts))
	for _, o := range opts {
		if o == "" {
			return nil, invalid(`%s has an option with an empty name.`, name)
		}
		if seen[o] {
			return nil, invalid(`%s names option %s twice.`, name, short(o))
		}
		seen[o] = true
	}
	return opts, nil
}

func optionName(item json.RawMessage) (string, bool) {
	var s string
	switch firstByte(item) {
	case '"':
		return s, json.Unmarshal(item, &s) == nil
	case '{':
		var o map[string]json.RawMessage
		if json.Unmarshal(item, &o) != nil {
			return "", false
		}
		for _, k := range []string{"name", "id"} {
			if v, ok := o[k]; ok && isString(v) && json.Unmarshal(v, &s) == nil {
				return s, true
			}
		}
	}
	return "", false
}

// checkJSON refuses a body that is not exactly one JSON value.
func checkJSON(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("The decide request is empty; send a JSON object with model, state and questions.")
	}
	var v any
	err := json.Unmarshal(body, &v)
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		if se.Offset >= int64(len(body)) {
			return invalid("The decide request is not JSON: it ends before its value does.")
		}
		return invalid("The decide request is not JSON: syntax error at byte %d.", se.Offset)
	}
	return invalid("The decide request is not JSON.")
}

type member struct {
	key   string
	value json.RawMessage
}

type object []member

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// members reads raw (valid JSON) as an object's members in order; ok is
// false when raw is not an object. A key given twice is an *InvalidError
// naming what.
func members(raw json.RawMessage, what string) (object, bool, error) {
	if firstByte(raw) != '{' {
		return nil, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, true, invalid("%s could not be read.", capitalise(what))
	}
	var o object
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, true, invalid("%s could not be read.", capitalise(what))
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, true, invalid("%s could not be read.", capitalise(what))
		}
		if seen[key] {
			return nil, true, invalid("%s gives the key %s twice.", capitalise(what), short(key))
		}
		seen[key] = true
		o = append(o, member{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return nil, true, invalid("%s could not be read.", capitalise(what))
	}
	return o, true, nil
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isString(raw json.RawMessage) bool { return firstByte(raw) == '"' }

// kindOf names raw's JSON kind for a message.
func kindOf(raw json.RawMessage) string {
	switch firstByte(raw) {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case 0:
		return "nothing"
	}
	return "a number"
}

// short quotes s for a message, cut to 64 characters.
func short(s string) string {
	r := []rune(s)
	if len(r) > 64 {
		return fmt.Sprintf("%q…", string(r[:64]))
	}
	return fmt.Sprintf("%q", s)
}
