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
}

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
}

// readUsage reads v, a "usage" member's value, into u, and reports false
// where json.Unmarshal would fail. As encoding/json decodes into a
// pointer already set, a second usage object adds to the first; null
// empties it.
func readUsage(v gjson.Result, u *usageFields) bool {
	obj, ok := jsonfield.Object(v)
	if !ok || !obj {
		*u = usageFields{}
		return ok
	}
	u.set = true
	v.ForEach(func(k, v gjson.Result) bool {
		switch name := jsonfield.Name(k); name {
		case "input_tokens":
			ok = jsonfield.Int(v, &u.input.n, &u.input.set)
		case "output_tokens":
			ok = jsonfield.Int(v, &u.output.n, &u.output.set)
		case "cache_creation_input_tokens":
			ok = jsonfield.Int(v, &u.cacheWrite.n, &u.cacheWrite.set)
		case "cache_read_input_tokens":
			ok = jsonfield.Int(v, &u.cacheRead.n, &u.cacheRead.set)
		case "cache_creation":
			ok = readOneInt(v, "ephemeral_1h_input_tokens", &u.cacheCreation, &u.ephemeral1h)
		case "server_tool_use":
			ok = readOneInt(v, "web_search_requests", &u.serverToolUse, &u.webSearches)
		default:
			switch folded(name, "input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "cache_creation", "server_tool_use") {
			case "":
			case "cache_creation":
				ok = readOneInt(v, "ephemeral_1h_input_tokens", new(bool), new(opt))
			case "server_tool_use":
				ok = readOneInt(v, "web_search_requests", new(bool), new(opt))
			default:
				ok = checkInt(v)
			}
		}
		return ok
	})
	return ok
}

// readOneInt reads v, an object's value of which only the integer member
// name is read, as json.Unmarshal reads it into a pointer to a struct of
// that one field: *present says whether v is an object (null empties
// it), *n the member's value. It reports false where json.Unmarshal would
// fail.
func readOneInt(v gjson.Result, name string, present *bool, n *opt) bool {
	obj, ok := jsonfield.Object(v)
	if !ok || !obj {
		*present, *n = false, opt{}
		return ok
	}
	*present = true
	v.ForEach(func(k, v gjson.Result) bool {
		switch got := jsonfield.Name(k); got {
		case name:
			ok = jsonfield.Int(v, &n.n, &n.set)
		default:
			if folded(got, name) != "" {
				ok = checkInt(v)
			}
		}
		return ok
	})
	return ok
}

// folded is the one of names that name matches only case-insensitively,
// as encoding/json matches a member's name to a field's when none matches
// exactly; "" for none. Such a member is not read, but it is checked as
// encoding/json would decode it (see checkString), so that what
// encoding/json refuses is refused.
func folded(name string, names ...string) string {
	for _, n := range names {
		if jsonfield.Fold(name, n) {
			return n
		}
	}
	return ""
}

// checkString and checkInt report whether v is a string or an integer
// that encoding/json would decode into a string or an *int64.
func checkString(v gjson.Result) bool {
	var s string
	return jsonfield.String(v, &s)
}

func checkInt(v gjson.Result) bool {
	var n int64
	var set bool
	return jsonfield.Int(v, &n, &set)
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
	switch {
	case !ok:
		return "", u, false
	case top.Type == gjson.Null:
		return "", u, false // no usage
	case !top.IsObject():
		return "", u, false
	}
	ok = readModelUsage(top, &model, &u)
	if !ok || !u.set {
		return "", usageFields{}, false
	}
	return model, u, true
}

// eventFields is what was read of a message_start or message_delta
// event's data.
type eventFields struct {
	typ          string
	message      bool // message is an object
	model        string
	messageUsage usageFields
	usage        usageFields
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
	top.ForEach(func(k, v gjson.Result) bool {
		switch name := jsonfield.Name(k); name {
		case "type":
			ok = jsonfield.String(v, &e.typ)
		case "message":
			ok = readMessage(v, &e)
		case "usage":
			ok = readUsage(v, &e.usage)
		default:
			switch folded(name, "type", "message", "usage") {
			case "type":
				ok = checkString(v)
			case "message":
				ok = readMessage(v, new(eventFields))
			case "usage":
				ok = readUsage(v, new(usageFields))
			}
		}
		return ok
	})
	return e, ok
}

func readMessage(v gjson.Result, e *eventFields) bool {
	obj, ok := jsonfield.Object(v)
	if !ok || !obj {
		e.message, e.model, e.messageUsage = false, "", usageFields{}
		return ok
	}
	e.message = true
	return readModelUsage(v, &e.model, &e.messageUsage)
}

// readModelUsage reads the members model and usage of the object v (a
// JSON answer, or a message_start event's message) into model and u. It
// reports false where json.Unmarshal would fail.
func readModelUsage(v gjson.Result, model *string, u *usageFields) bool {
	ok := true
	v.ForEach(func(k, v gjson.Result) bool {
		switch name := jsonfield.Name(k); name {
		case "model":
			ok = jsonfield.String(v, model)
		case "usage":
			ok = readUsage(v, u)
		default:
			switch folded(name, "model", "usage") {
			case "model":
				ok = checkString(v)
			case "usage":
				ok = readUsage(v, new(usageFields))
			}
		}
		return ok
	})
	return ok
}
