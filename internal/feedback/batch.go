package feedback

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// Batch is what the broker reads of a feedback batch: how many entries and
// counts it carries. It never interprets an entry or a count; what they
// hold is the receiver's format.
type Batch struct {
	// Entries is the length of entries when it is an array, else 0.
	Entries int
	// Counts is the number of keys of counts when it is an object, else 0.
	Counts int
}

// Words are the scope words a batch needs: agent for non-empty entries,
// passive for non-empty counts, in that order whatever the key order.
func (b Batch) Words() []string {
	words := []string{}
	if b.Entries > 0 {
		words = append(words, WordEntries)
	}
	if b.Counts > 0 {
		words = append(words, WordCounts)
	}
	return words
}

// Problems Parse reports; Serve answers each with a 400 whose message is
// the problem's own (see message).
var (
	ErrNotJSON       error = &problem{"batch is not JSON", "The feedback batch is not JSON: send one JSON object, UTF-8."}
	ErrNotObject     error = &problem{"batch is not a JSON object", "A feedback batch is a JSON object carrying entries, counts or both."}
	ErrDuplicate     error = &problem{"batch gives entries or counts twice", "The feedback batch gives entries or counts more than once; give each once."}
	ErrEntriesNotArr error = &problem{"entries is not an array", "The feedback batch's entries is not an array."}
	ErrCountsNotObj  error = &problem{"counts is not an object", "The feedback batch's counts is not an object."}
	ErrCase          error = &problem{"batch names entries or counts in another case",
		"The feedback batch names entries or counts in another case (such as Entries); name them entries and counts, in lower case."}
	ErrEmpty error = &problem{"batch carries neither entries nor counts",
		"A feedback batch carries a non-empty entries array, a non-empty counts object, or both; this one carries neither."}
)

// problem is a problem Parse reports: its error text, and msg, what the
// box is told of it.
type problem struct{ text, msg string }

func (p *problem) Error() string { return p.text }

// message is what the box is told of a problem Parse reported.
func message(err error) string {
	if p, ok := errors.AsType[*problem](err); ok {
		return p.msg
	}
	return "The feedback batch could not be read."
}

// Parse reads body as a feedback batch. It returns the batch and nil for a
// batch the broker keeps; otherwise it returns one of the errors above and
// the batch as far as it could be read, whose Words are still the words
// the request needs (chant's scopes(): [] for a body that is not an object
// or whose entries and counts are empty or of another type).
//
// A top-level key given twice is refused (ErrDuplicate), since a receiver
// that takes the first occurrence would read a batch other than the one
// the rule judged; its Words count every occurrence, so the rule judges
// the widest reading. A key that is entries or counts in another case
// (Entries, COUNTS) is read as it, as a receiver matching names without
// regard to case (encoding/json) would, and refused (ErrCase): its Words
// count it, and given beside the key itself it is given twice.
func Parse(body []byte) (Batch, error) {
	var b Batch
	if !utf8.Valid(body) || !json.Valid(body) {
		return b, ErrNotJSON
	}
	body = bytes.TrimLeft(body, " \t\r\n")
	if len(body) == 0 || body[0] != '{' {
		return b, ErrNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the '{'
		return b, ErrNotJSON
	}
	var problem error
	note := func(err error) {
		if problem == nil {
			problem = err
		}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return b, ErrNotJSON
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return b, ErrNotJSON
		}
		switch {
		case strings.EqualFold(key, "entries"):
			if key != "entries" {
				note(ErrCase)
			}
			key = "entries"
		case strings.EqualFold(key, "counts"):
			if key != "counts" {
				note(ErrCase)
			}
			key = "counts"
		default:
			continue // the receiver's to read
		}
		if seen[key] {
			note(ErrDuplicate)
		}
		seen[key] = true
		switch key {
		case "entries":
			raw = bytes.TrimSpace(raw)
			var entries []json.RawMessage
			if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &entries) != nil {
				note(ErrEntriesNotArr)
				continue
			}
			b.Entries = max(b.Entries, len(entries))
		case "counts":
			n, ok := objectKeys(raw)
			if !ok {
				note(ErrCountsNotObj)
				continue
			}
			b.Counts = max(b.Counts, n)
		}
	}
	if _, err := dec.Token(); err != nil { // the '}'
		return b, ErrNotJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return b, ErrNotJSON
	}
	if problem != nil {
		return b, problem
	}
	if b.Entries == 0 && b.Counts == 0 {
		return b, ErrEmpty
	}
	return b, nil
}

// objectKeys counts the keys of raw when it is a JSON object, counting a
// repeated key each time it appears.
func objectKeys(raw json.RawMessage) (int, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return 0, false
	}
	n := 0
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return 0, false
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, false
		}
		n++
	}
	return n, true
}
