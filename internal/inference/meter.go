package inference

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/jsonfield"
	"github.com/intentius/boxbroker/internal/protocol"
)

// MaxRead is the largest Messages body whose model and max_tokens are
// read to bound its cost. A larger body is bounded by its length and the
// meter's own max_tokens bound.
const MaxRead = 1 << 20

// MeterBody reports that POST /llm/anthropic/v1/messages is metered, its
// body read up to MaxRead bytes.
func (c *Capability) MeterBody(r *http.Request) (int64, bool) {
	return MaxRead, r.Method == http.MethodPost && r.URL.Path == protocol.PrefixAnthropic+"/v1/messages"
}

// Estimate bounds a Messages call: one call, of the model and max_tokens
// its body names, or of an unknown model and output when body is nil.
//
// The body's top-level "model" and "max_tokens" are read as encoding/json
// reads them into a string and an *int64, but matched by exact name, as
// the Anthropic API matches them; nothing of a body that json.Unmarshal
// would refuse is read. A body with a member named so only
// case-insensitively ("MAX_TOKENS"), which encoding/json would also read,
// names no model, and its output is bounded by the largest of the meter's
// bound and every such member's value: never under what encoding/json
// would have read.
func (c *Capability) Estimate(_ *http.Request, body []byte) capability.Estimate {
	e := capability.Estimate{Calls: 1}
	if body == nil {
		return e
	}
	f, ok := readRequest(body)
	if !ok {
		return e
	}
	if !f.foldModel {
		e.Model = f.model
	}
	switch {
	case f.foldMax:
		if f.topSet {
			e.MaxTokens = f.top
		}
	case f.maxSet && f.maxTokens >= 0:
		e.MaxTokens, e.Capped = f.maxTokens, true
	}
	return e
}

// requestFields is what readRequest read of a Messages body.
type requestFields struct {
	model     string
	maxTokens int64
	maxSet    bool // max_tokens read, and not emptied by a later null
	// foldModel and foldMax are true when a member named "model" or
	// "max_tokens" only case-insensitively was seen (and not read).
	foldModel, foldMax bool
	// top is the largest integer of any member named max_tokens, exactly
	// or case-insensitively (topSet: any).
	top    int64
	topSet bool
}

// readRequest reads a Messages body's top-level model and max_tokens.
// For a valid JSON document it reports false when json.Unmarshal would
// refuse the body as one of
//
//	struct {
//		Model     string `json:"model"`
//		MaxTokens *int64 `json:"max_tokens"`
//	}
//
// and otherwise reads the members as json.Unmarshal does — the last of
// duplicates wins, null leaves the model as it was and empties
// max_tokens — but for names matched case-insensitively, which it only
// notes and checks (see requestFields).
func readRequest(body []byte) (requestFields, bool) {
	var f requestFields
	// Not checked for validity first (json.Valid would cost more than the
	// walk): an invalid body reads as something or nothing, and the API
	// refuses it unbilled.
	top := jsonfield.View(body)
	ok := true
	switch {
	case !top.Exists():
		return f, false
	case top.Type == gjson.Null:
		return f, true
	case !top.IsObject():
		return f, false
	}
	top.ForEach(func(k, v gjson.Result) bool {
		switch name := jsonfield.Name(k); {
		case name == "model":
			ok = jsonfield.String(v, &f.model)
		case name == "max_tokens":
			ok = jsonfield.Int(v, &f.maxTokens, &f.maxSet)
			f.noteTop(f.maxTokens, f.maxSet)
		case jsonfield.Fold(name, "model"):
			var s string
			f.foldModel = true
			ok = jsonfield.String(v, &s)
		case jsonfield.Fold(name, "max_tokens"):
			var n int64
			var set bool
			f.foldMax = true
			ok = jsonfield.Int(v, &n, &set)
			f.noteTop(n, set)
		}
		return ok
	})
	return f, ok
}

func (f *requestFields) noteTop(n int64, set bool) {
	if set && (!f.topSet || n > f.top) {
		f.top, f.topSet = n, true
	}
}
