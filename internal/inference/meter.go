package inference

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/jsonfield"
	"github.com/intentius/boxbroker/internal/protocol"
)

// MaxRead is how much of a Messages body the meter reads by its own
// limit: a box with no budget has at most this much kept as its body
// passes. For a payer held to a budget the meter reads the body whole,
// up to its own MaxBody, so that no tool or source goes unseen.
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
//
// A body json.Unmarshal would refuse is Unboundable: the API may read
// what encoding/json does not (an integral max_tokens written with an
// exponent or a fraction, 1.28e5), and nothing else of it is read.
//
// The call is Unbounded when its input is not bounded by the body's
// bytes: a content block's source (in "messages" or "system", in a
// tool_result's content, or in a document's content source) whose type
// is not "text" (a "url" or "file" source, which the API fetches, or a
// "base64" image or PDF, which it counts by pixels and pages: a few
// hundred bytes of PNG can be a megapixel), a server tool
// in "tools" (any tool whose "type" is set and is not "custom" or one of
// the client tools bash_, text_editor_, computer_, memory_), or an
// "mcp_servers" member that is not null or empty. Each server tool's
// max_uses adds to Rounds (and a web search tool's to Searches); a server
// tool, or an MCP server, with no max_uses makes the call Unboundable, and
// so does a "speed" that is not null or "standard" (fast mode, billed at
// a multiple of the model's rates), and a code execution tool
// (code_execution_...) but beside a web search or web fetch tool of
// version 20260209 or later: its container time is billed by the hour,
// with no bound for a call. A body that is nil (not read) is
// Unbounded too.
//
// Geo is the geography the body's inference_geo names (as readGeo reads
// it): "global" when every such member is "global", named so exactly;
// "" when it names none (no member, or null), and the API runs the call
// in the workspace's default geography, which may be priced at a
// multiplier.
//
// Context1M is set when the betas the call asks for name context-1m:
// those of its anthropic-beta header and of its body's anthropic_beta
// (in any case of the name), read as the cloud paths read them
// (cloud.Asked), so that a call is priced for every beta any path
// sends.
func (c *Capability) Estimate(r *http.Request, body []byte) capability.Estimate {
	var header []string
	if r != nil {
		header = r.Header.Values("anthropic-beta")
	}
	e := capability.Estimate{Calls: 1, Context1M: cloud.Context1M(cloud.Asked(header, nil))}
	if body == nil {
		e.Unbounded = true
		return e
	}
	f, ok := readRequest(body)
	if len(f.betas) > 0 {
		e.Context1M = cloud.Context1M(cloud.Asked(header, f.betas))
	}
	if !ok {
		e.Unboundable = unread
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
	e.Unbounded = f.fetches || f.servers > 0
	if e.Unbounded {
		e.Rounds = 1 + f.uses
		e.Searches = f.searches
	}
	e.Unboundable = f.unboundable
	e.Geo = f.geo
	if e.Geo == "" && f.global && !f.unnamed {
		e.Geo = "global"
	}
	e.ToolTokens = f.toolTokens
	return e
}

// unread is why a body readRequest does not read (one json.Unmarshal
// refuses) is Unboundable: the API may take what encoding/json refuses
// (a max_tokens of 1.28e5 or 128000.0 as 128000), and none of the body's
// max_tokens, sources, tools or inference_geo is read to bound it.
const unread = "its body is not one the broker reads (a top-level JSON object whose model is a string and whose max_tokens is an integer written without a fraction or an exponent, as 128000 and not 1.28e5), so nothing bounds its output or what the API fetches or runs for it (with max_tokens written so, the call is bounded)"

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

	// fetches is true when a content block's source is fetched by the
	// API (see Estimate).
	fetches bool
	// servers counts the server tools and MCP servers; uses sums their
	// max_uses, searches the web search tools' (both at most maxUses).
	servers, uses, searches int64
	// unboundable, when not "", says which server tool sets no max_uses.
	unboundable string
	// toolTokens bounds the input the API adds for the client tools
	// of "tools" (clientToolTokens each).
	toolTokens int64
	// geo is the geography an inference_geo member (named so in any
	// case) asks inference to run in, when not null or "global" (cut to
	// maxGeo bytes; "?" for a value that is not a string). global is
	// true when a member named exactly inference_geo is "global", unnamed
	// when one is null or is named so only in another case: either may
	// be the one a decoder takes, and then the workspace's default
	// geography applies.
	geo             string
	global, unnamed bool
	// betas are the values of every anthropic_beta member, named so in
	// any case (cloud.IsBodyBeta); a value that is not a list of strings
	// is kept whole, as its JSON.
	betas []string
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
	esc := nameEscape(top.Raw)
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
		case name == "messages":
			f.fetches = f.fetches || mayHold(v.Raw, esc) && messagesFetch(v, esc)
		case name == "system":
			f.fetches = f.fetches || mayHold(v.Raw, esc) && blocksFetch(v, 0, esc)
		case name == "tools":
			f.readTools(v)
		case name == "mcp_servers":
			f.readMCP(v)
		case name == "speed":
			f.readSpeed(v)
		case strings.EqualFold(name, "inference_geo"):
			f.readGeo(v, name == "inference_geo")
		case cloud.IsBodyBeta(name):
			list, err := cloud.BodyBetas([]byte(v.Raw))
			if err != nil {
				list = []string{v.Raw}
			}
			f.betas = append(f.betas, list...)
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

// maxUses bounds the uses summed from a body's tools, well past what any
// budget could pay for.
const maxUses = 1 << 30

// maxDepth bounds how deep content blocks are looked into; a body nested
// deeper is taken to fetch.
const maxDepth = 32

// messagesFetch reports whether v, a "messages" value, holds a content
// block whose source the API fetches. esc is true when the body holds a
// \u escape with which a name may be written (see nameEscape).
func messagesFetch(v gjson.Result, esc bool) bool {
	if !v.IsArray() {
		return false // the API refuses it
	}
	return anyMember(v, esc, func(name string, c gjson.Result) bool {
		return name == "content" && blocksFetch(c, 0, esc)
	})
}

// anyMember reports whether f holds for a member of an object in v, an
// array, its name read as jsonfield.Name does; an object that cannot
// hold a "source" (mayHold) is passed over. It stops at the first.
func anyMember(v gjson.Result, esc bool, f func(name string, x gjson.Result) bool) bool {
	found := false
	v.ForEach(func(_, o gjson.Result) bool {
		if o.IsObject() && mayHold(o.Raw, esc) {
			o.ForEach(func(k, x gjson.Result) bool {
				found = f(jsonfield.Name(k), x)
				return !found
			})
		}
		return !found
	})
	return found
}

// blocksFetch reports whether v, a content value (a string or an array of
// content blocks), holds a block whose source the API fetches or counts
// otherwise than by its bytes: a source whose type is not "text", in the
// blocks or in the content of
// any of them (a tool_result's, a search result's) or of their sources (a
// document's "content" source), depth levels down.
func blocksFetch(v gjson.Result, depth int, esc bool) bool {
	if !v.IsArray() {
		return false // a string, or refused by the API
	}
	if depth > maxDepth {
		return true
	}
	return anyMember(v, esc, func(name string, x gjson.Result) bool {
		switch name {
		case "source":
			return sourceFetched(x, depth, esc)
		case "content":
			return blocksFetch(x, depth+1, esc)
		}
		return false
	})
}

// sourceFetched reports whether v, a content block's source, is fetched
// by the API, or counted otherwise than by its bytes (base64 images and
// PDFs): any of its "type" members (a decoder may take the first of
// duplicates or the last) is not "text", or it has none, or one is
// "content" and its content holds a block that is.
func sourceFetched(v gjson.Result, depth int, esc bool) bool {
	if !v.IsObject() {
		return false // the API refuses it
	}
	typed, fetched, nested := false, false, false
	var content []gjson.Result
	v.ForEach(func(k, x gjson.Result) bool {
		switch jsonfield.Name(k) {
		case "type":
			typed = true
			// null, or any kind but a string, is no type the API takes
			// as bounded
			typ := "?"
			if x.Type == gjson.String {
				jsonfield.String(x, &typ)
			}
			switch typ {
			case "text":
			case "content":
				nested = true
			default:
				fetched = true
			}
		case "content":
			content = append(content, x)
		}
		return !fetched
	})
	if fetched || !typed {
		return true
	}
	if nested {
		for _, c := range content {
			if blocksFetch(c, depth+1, esc) {
				return true
			}
		}
	}
	return false
}

// clientTools are the type prefixes of the Anthropic-defined tools that
// the client runs (bash_20250124, text_editor_20250728, ...): they fetch
// nothing at the API.
var clientTools = [...]string{"bash_", "text_editor_", "computer_", "memory_"}

// readTools notes the server tools of v, a "tools" value: every tool
// whose type is set and is not "custom" or a client tool's.
func (f *requestFields) readTools(v gjson.Result) {
	if !v.IsArray() {
		return // the API refuses it
	}
	prev := f.unboundable
	// codeExec is the first code execution tool's type; free is true
	// when a tool's type makes code execution free of container time.
	var codeExec string
	free := false
	v.ForEach(func(_, t gjson.Result) bool {
		if !t.IsObject() {
			return true
		}
		// Of duplicate members, a decoder may take the first or the
		// last: the tool is a server tool when any of its types is one,
		// and its uses are the most any max_uses says, none when any is
		// not a count.
		var types []string
		var uses int64
		usesSet, usesBad := false, false
		t.ForEach(func(k, x gjson.Result) bool {
			switch jsonfield.Name(k) {
			case "type":
				typ := "?"
				if x.Type == gjson.Null {
					typ = ""
				} else if x.Type == gjson.String {
					jsonfield.String(x, &typ)
				}
				types = append(types, typ)
			case "max_uses":
				var n int64
				var set bool
				if !jsonfield.Int(x, &n, &set) || !set || n < 0 {
					usesBad = true
				} else {
					uses, usesSet = max(uses, n), true
				}
			}
			return true
		})
		i := slices.IndexFunc(types, serverTool)
		if i < 0 {
			if slices.ContainsFunc(types, clientTool) {
				f.toolTokens = min(f.toolTokens+clientToolTokens, maxUses)
			}
			return true
		}
		typ := types[i]
		if j := slices.IndexFunc(types, codeExecution); j >= 0 && codeExec == "" {
			codeExec = types[j]
		}
		free = free || slices.ContainsFunc(types, freesCodeExecution)
		f.servers++
		if !usesSet || usesBad {
			if f.unboundable == "" {
				f.unboundable = fmt.Sprintf("its server tool of type %.64q sets no max_uses, so nothing bounds how often the API runs it (with max_uses set on every server tool, the call is bounded)", typ)
			}
			return true
		}
		f.uses = min(f.uses+min(uses, maxUses), maxUses)
		if slices.ContainsFunc(types, func(ty string) bool { return strings.HasPrefix(ty, "web_search_") }) {
			f.searches = min(f.searches+min(uses, maxUses), maxUses)
		}
		return true
	})
	if codeExec != "" && !free && prev == "" {
		// the reason over this list's max_uses: with them the call is
		// still not bounded
		f.unboundable = fmt.Sprintf("its tool of type %.64q runs code in a container the API bills by its time ($0.05 an hour, at least 5 minutes a call), which no member of a call bounds and the broker does not measure (beside a web search or web fetch tool of version 20260209 or later, code execution is not billed)", codeExec)
	}
}

// codeExecution reports whether a tool of type typ is the code execution
// tool (code_execution_20250825 and the others), whose container time
// the API bills by the hour, with no upper bound for a call.
func codeExecution(typ string) bool { return strings.HasPrefix(typ, "code_execution_") }

// freesCodeExecution reports whether a tool of type typ makes the call's
// code execution free of container time, as Anthropic prices it: a web
// search or web fetch tool of version 20260209 or later.
func freesCodeExecution(typ string) bool {
	for _, p := range [...]string{"web_search_", "web_fetch_"} {
		if v, ok := strings.CutPrefix(typ, p); ok && len(v) == 8 && strings.Trim(v, "0123456789") == "" {
			return v >= "20260209"
		}
	}
	return false
}

// clientToolTokens bounds the input tokens the API adds for the
// definition of one Anthropic-defined client tool, which the body names by
// its type alone: some 245 for bash, 700 for text_editor, 735 for
// computer, as Anthropic's tool-use pricing gives them.
const clientToolTokens = 1024

// clientTool reports whether a tool of type typ is an Anthropic-defined
// tool the client runs (clientTools).
func clientTool(typ string) bool {
	for _, p := range clientTools {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// serverTool reports whether a tool of type typ runs at the API: typ is
// set, and is not "custom" or a client tool's.
func serverTool(typ string) bool {
	if typ == "" || typ == "custom" {
		return false
	}
	for _, p := range clientTools {
		if strings.HasPrefix(typ, p) {
			return false
		}
	}
	return true
}

// readMCP notes v, an "mcp_servers" value: any value but null or an
// empty array has the API call remote servers, with no bound on how
// often.
func (f *requestFields) readMCP(v gjson.Result) {
	if v.Type == gjson.Null || v.IsArray() && !v.Get("0").Exists() {
		return
	}
	f.servers++
	if f.unboundable == "" {
		f.unboundable = "it names MCP servers (mcp_servers), whose tools the API runs with no bound on how often"
	}
}

// maxGeo bounds the inference_geo kept: only whether it is "global"
// matters to its price.
const maxGeo = 16

// readGeo notes v, an "inference_geo" value, of a member named so
// exactly or (exact false) in another case: any but null or "global" has
// the API price the call at its model's multiplier for that geography
// (spend's Price.GeoUS). Of several members, any such one counts,
// whichever a decoder would take. A null, or a "global" the API does not
// read as inference_geo (exact false), names no geography: the
// workspace's default applies.
func (f *requestFields) readGeo(v gjson.Result, exact bool) {
	geo := "?"
	switch {
	case v.Type == gjson.Null:
		f.unnamed = true
		return
	case v.Type == gjson.String && jsonfield.String(v, &geo) && geo == "global":
		f.global = f.global || exact
		f.unnamed = f.unnamed || !exact
		return
	}
	if geo == "" {
		geo = "?"
	}
	if f.geo == "" {
		f.geo = geo[:min(len(geo), maxGeo)]
	}
}

// readSpeed notes v, a "speed" value: any but null or "standard" (fast
// mode) has the API bill the call at a multiple of its model's rates,
// which the price table does not hold.
func (f *requestFields) readSpeed(v gjson.Result) {
	speed := v.Raw
	if v.Type == gjson.Null || v.Type == gjson.String && jsonfield.String(v, &speed) && speed == "standard" {
		return
	}
	if f.unboundable == "" {
		f.unboundable = fmt.Sprintf("it asks for speed %.64q (fast mode), which the API bills at a multiple of the model's rates that the broker's price table does not hold (with no speed, or \"standard\", the call is bounded)", speed)
	}
}

// mayHold reports whether raw, a JSON value, may hold a member named
// "source": it holds the name written plainly, or esc is true (the body
// holds an escape with which the name may be written; see nameEscape). A value that may
// not is passed over unwalked: gjson's ForEach decodes every string it
// passes, and a conversation's text runs to megabytes.
func mayHold(raw string, esc bool) bool {
	return esc || holdsSource(raw)
}

// holdsSource reports whether s holds "source" (quotes included), as
// strings.Contains would. It looks for `urce"` and then at the three
// bytes before: strings.Index steps from one candidate first byte to the
// next, and a quote, which starts every JSON string, is a far commoner
// byte than 'u' in a conversation's text.
func holdsSource(s string) bool {
	const tail, head = `urce"`, `"so`
	for i := 0; ; {
		j := strings.Index(s[i:], tail)
		if j < 0 {
			return false
		}
		i += j
		if i >= len(head) && s[i-len(head):i] == head {
			return true
		}
		i += len(tail)
	}
}

// nameEscape reports whether s holds a \u escape of '_' or a lowercase
// letter (\u0050 to \u007f, hex digits in either case: every character
// of the member names Estimate looks for). It looks for "u00", whose
// first byte is rarer than a backslash in JSON text.
func nameEscape(s string) bool {
	if len(s) < len(`\u0061`) {
		return false
	}
	for i := 1; ; {
		j := strings.Index(s[i:], "u00")
		if j < 0 {
			return false
		}
		i += j
		if i+3 < len(s) && s[i-1] == '\\' && s[i+3] >= '5' && s[i+3] <= '7' {
			return true
		}
		i += 3
		if i >= len(s) {
			return false
		}
	}
}
