package spend

import (
	"github.com/tidwall/gjson"

	"github.com/intentius/boxbroker/internal/jsonfield"
)

// usageFields is what was read of a usage object, as encoding/json reads
// one into a *struct of *int64 fields: set is false when the object is
// absent or was emptied by a later null.
type usageFields struct {
	set                                  bool
	input, output, cacheWrite, cacheRead opt
	cacheCreation                        bool // cache_creation is an object
	ephemeral1h                          opt
	serverToolUse                        bool // server_tool_use is an object
	webSearches                          opt
	geo                                  string // inference_geo: where inference ran
}

// maxGeo bounds the inference_geo kept of an answer's usage: only whether
// it is "global" matters (Price.Cost).
const maxGeo = 16

// opt is an integer as encoding/json reads one into an *int64.
type opt struct {
	n   int64
	set bool
}

// MaxReportedTokens bounds each count an upstream's usage reports
// (input, output, cache write and read tokens, web searches): a larger
// count is taken as MaxReportedTokens. It is some thousand times the
// largest context window, and small enough that no sum of such counts
// the broker or a store keeps passes an int64 (or a store's column)
// before 2^31 calls at the bound: an upstream that reports 2^62 tokens
// costs its call's bound, and cannot make a batch of settlements the
// store refuses.
const MaxReportedTokens = 1 << 32

// tokens sets each of t's counts that u holds (a negative count is not
// taken; one past MaxReportedTokens is taken as MaxReportedTokens).
func (u *usageFields) tokens(t *Tokens) {
	take := func(to *int64, o opt) {
		if o.set && o.n >= 0 {
			*to = min(o.n, MaxReportedTokens)
		}
	}
	take(&t.Input, u.input)
	take(&t.Output, u.output)
	take(&t.CacheWrite, u.cacheWrite)
	take(&t.CacheRead, u.cacheRead)
	if u.cacheCreation {
		take(&t.CacheWrite1h, u.ephemeral1h)
	}
	if u.serverToolUse {
		take(&t.WebSearches, u.webSearches)
	}
	if u.geo != "" {
		t.Geo = u.geo[:min(len(u.geo), maxGeo)]
	}
}

// member is a member of a JSON object that is read into a T: its name,
// and read, which reads its value into a T's field as json.Unmarshal
// reads it into the field of that name, and reports false where
// json.Unmarshal would fail.
type member[T any] struct {
	name string
	read func(v gjson.Result, into *T) bool
}

// readMembers reads the object v into into as json.Unmarshal reads an
// object into a struct whose fields are members: a member named exactly
// is read, and, as encoding/json decodes into what is set already, a
// second one adds to the first. A member whose name matches one only
// case-insensitively (as encoding/json matches a member's name to a
// field's when none matches exactly) is not read, but it is checked as
// encoding/json would decode it, into a T of its own, so that what
// encoding/json refuses is refused. It reports false where json.Unmarshal
// would fail.
func readMembers[T any](v gjson.Result, into *T, members []member[T]) bool {
	ok := true
	v.ForEach(func(k, v gjson.Result) bool {
		name := jsonfield.Name(k)
		for _, m := range members {
			if m.name == name {
				ok = m.read(v, into)
				return ok
			}
		}
		for _, m := range members {
			if jsonfield.Fold(name, m.name) {
				ok = m.read(v, new(T))
				break
			}
		}
		return ok
	})
	return ok
}

// readPtr reads v into into as json.Unmarshal reads a value into a
// pointer to a struct whose fields are members: *present says whether v
// is an object, and null empties into. It reports false where
// json.Unmarshal would fail.
func readPtr[T any](v gjson.Result, into *T, present *bool, members []member[T]) bool {
	obj, ok := jsonfield.Object(v)
	if !ok || !obj {
		*into, *present = *new(T), false
		return ok
	}
	*present = true
	return readMembers(v, into, members)
}

// readInt reads v into o as encoding/json reads a value into an *int64.
func readInt(v gjson.Result, o *opt) bool { return jsonfield.Int(v, &o.n, &o.set) }

// oneInt is the members of an object of which only the integer member
// name is read.
func oneInt(name string) []member[opt] { return []member[opt]{{name, readInt}} }

var (
	ephemeral1hMembers = oneInt("ephemeral_1h_input_tokens")
	webSearchMembers   = oneInt("web_search_requests")
)

// usageMembers read a usage object, as json.Unmarshal reads it into a
// *struct of *int64 fields (and of the *structs cache_creation and
// server_tool_use, each of one *int64), and inference_geo, a string.
var usageMembers = []member[usageFields]{
	{"input_tokens", func(v gjson.Result, u *usageFields) bool { return readInt(v, &u.input) }},
	{"output_tokens", func(v gjson.Result, u *usageFields) bool { return readInt(v, &u.output) }},
	{"cache_creation_input_tokens", func(v gjson.Result, u *usageFields) bool { return readInt(v, &u.cacheWrite) }},
	{"cache_read_input_tokens", func(v gjson.Result, u *usageFields) bool { return readInt(v, &u.cacheRead) }},
	{"cache_creation", func(v gjson.Result, u *usageFields) bool {
		return readPtr(v, &u.ephemeral1h, &u.cacheCreation, ephemeral1hMembers)
	}},
	{"server_tool_use", func(v gjson.Result, u *usageFields) bool {
		return readPtr(v, &u.webSearches, &u.serverToolUse, webSearchMembers)
	}},
	{"inference_geo", func(v gjson.Result, u *usageFields) bool { return jsonfield.String(v, &u.geo) }},
}

// readUsage reads v, a "usage" member's value, into u (see readPtr).
func readUsage(v gjson.Result, u *usageFields) bool { return readPtr(v, u, &u.set, usageMembers) }

// modelUsage is what was read of an object's model and usage members: a
// JSON answer's, or a message_start event's message.
type modelUsage struct {
	model string
	usage usageFields
}

var modelUsageMembers = []member[modelUsage]{
	{"model", func(v gjson.Result, m *modelUsage) bool { return jsonfield.String(v, &m.model) }},
	{"usage", func(v gjson.Result, m *modelUsage) bool { return readUsage(v, &m.usage) }},
}

// readAnswer reads a JSON answer's top-level model and usage as
// json.Unmarshal reads them into
//
//	struct {
//		Model string         `json:"model"`
//		Usage *usageFields `json:"usage"`
//	}
//
// names matched exactly. It reports false when the answer is not JSON,
// json.Unmarshal would fail, or it has no usage.
func readAnswer(doc []byte) (model string, u usageFields, ok bool) {
	top, ok := jsonfield.Parse(doc)
	if !ok || !top.IsObject() { // null has no usage either
		return "", u, false
	}
	var mu modelUsage
	if !readMembers(top, &mu, modelUsageMembers) || !mu.usage.set {
		return "", usageFields{}, false
	}
	return mu.model, mu.usage, true
}

// eventFields is what was read of a message_start or message_delta
// event's data.
type eventFields struct {
	typ     string
	message bool       // message is an object
	msg     modelUsage // message's model and usage
	usage   usageFields
}

var eventMembers = []member[eventFields]{
	{"type", func(v gjson.Result, e *eventFields) bool { return jsonfield.String(v, &e.typ) }},
	{"message", func(v gjson.Result, e *eventFields) bool { return readPtr(v, &e.msg, &e.message, modelUsageMembers) }},
	{"usage", func(v gjson.Result, e *eventFields) bool { return readUsage(v, &e.usage) }},
}

// readEvent reads a stream event's data as json.Unmarshal reads it into
//
//	struct {
//		Type    string `json:"type"`
//		Message *struct {
//			Model string       `json:"model"`
//			Usage *usageFields `json:"usage"`
//		} `json:"message"`
//		Usage *usageFields `json:"usage"`
//	}
//
// names matched exactly. It reports false where json.Unmarshal would fail.
func readEvent(data []byte) (eventFields, bool) {
	var e eventFields
	top, ok := jsonfield.Parse(data)
	switch {
	case !ok:
		return e, false
	case top.Type == gjson.Null:
		return e, true
	case !top.IsObject():
		return e, false
	}
	return e, readMembers(top, &e, eventMembers)
}
