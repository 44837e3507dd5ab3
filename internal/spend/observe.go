package spend

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// Bounds on what an observer keeps of an answer.
const (
	// MaxJSON is how much of a JSON answer is kept to be parsed whole at
	// its end. Past it only the first and last TailJSON bytes are kept,
	// and the usage is read from the tail.
	MaxJSON = 1 << 20
	// TailJSON is how much of the end of a larger JSON answer is kept.
	TailJSON = 64 << 10
	// MaxLine is the longest stream line kept; a longer one is skipped
	// (message_start and message_delta lines are a few hundred bytes).
	MaxLine = 256 << 10
)

// usageJSON is a Messages usage object; a nil field was absent.
type usageJSON struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

// apply sets each field of t that u holds.
func (u *usageJSON) apply(t *Tokens) {
	set := func(to *int64, v *int64) {
		if v != nil && *v >= 0 {
			*to = *v
		}
	}
	set(&t.Input, u.InputTokens)
	set(&t.Output, u.OutputTokens)
	set(&t.CacheWrite, u.CacheCreationInputTokens)
	set(&t.CacheRead, u.CacheReadInputTokens)
	if u.CacheCreation != nil {
		set(&t.CacheWrite1h, u.CacheCreation.Ephemeral1h)
	}
}

// reading is what was read of one upstream answer. Its fields are guarded
// by the ticket's mutex once the answer is under way.
type reading struct {
	// model is the model the answer names ("" until read).
	model string
	// tokens are the usage read so far.
	tokens Tokens
	// measured is true once the answer's whole usage has been read: a
	// JSON answer parsed at its end, or a stream's message_start and
	// message_delta both seen.
	measured bool
	// open is true until the answer's body is read to its end or closed.
	open bool
}

// observer wraps an answer's body and reads the usage in the bytes as the
// reader takes them: it never holds bytes back and never reads ahead, and
// it looks at each read's bytes only once the reader has passed them on.
// Memory is bounded: one read's bytes, and a partial line for a stream or
// at most MaxJSON plus TailJSON for a JSON answer. The usage is recorded
// when the body is closed.
type observer struct {
	body io.ReadCloser
	sse  bool
	mu   *sync.Mutex // the ticket's; guards *r
	r    *reading

	// Stream state: line holds a partial line; skip is true while the
	// rest of an over-long line is passed over.
	line         []byte
	skip         bool
	named        bool // the event under way is named message_start or message_delta
	start, delta bool
	model        string
	tokens       Tokens
	// JSON state: kept is the whole answer, or its head once over
	// MaxJSON; tail then holds its last bytes.
	kept     []byte
	tail     []byte
	over     bool
	finished bool
	// pending holds what the last Read handed on, not yet looked at (at
	// most one read's worth); eof is true once the body ended.
	pending []byte
	eof     bool
}

// Read reads from the body. What it read is looked at only at the next
// Read or at Close, once the reader has passed it on: observing never
// delays a byte.
func (o *observer) Read(p []byte) (int, error) {
	o.catchUp()
	n, err := o.body.Read(p)
	if n > 0 && !o.finished {
		o.pending = append(o.pending[:0], p[:n]...)
	}
	if err == io.EOF {
		o.eof = true
	}
	return n, err
}

// catchUp observes the bytes the last Read handed on.
func (o *observer) catchUp() {
	if len(o.pending) == 0 || o.finished {
		return
	}
	if o.sse {
		o.observeStream(o.pending)
	} else {
		o.observeJSON(o.pending)
	}
	o.pending = o.pending[:0]
}

// Close closes the body and records what was read: all of the answer when
// the body was read to its end, or else what came before it was closed.
func (o *observer) Close() error {
	o.catchUp()
	o.finish(o.eof)
	return o.body.Close()
}

func (o *observer) observeJSON(p []byte) {
	if !o.over {
		if len(o.kept)+len(p) <= MaxJSON {
			o.kept = append(o.kept, p...)
			return
		}
		o.over = true
		o.kept = append([]byte(nil), o.kept[:min(len(o.kept), TailJSON)]...) // the head, for the model
	}
	o.tail = append(o.tail, p...)
	if len(o.tail) > 2*TailJSON {
		o.tail = append(o.tail[:0], o.tail[len(o.tail)-TailJSON:]...)
	}
}

func (o *observer) observeStream(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			o.carry(p)
			return
		}
		seg := p[:i]
		p = p[i+1:]
		switch {
		case o.skip:
			o.skip = false
		case len(o.line) > 0:
			if len(o.line)+len(seg) > MaxLine {
				o.line = o.line[:0]
				continue
			}
			o.line = append(o.line, seg...)
			o.event(o.line)
			o.line = o.line[:0]
		default:
			o.event(seg)
		}
	}
}

// carry keeps a partial line for the next read, or skips it when too long.
func (o *observer) carry(p []byte) {
	if o.skip {
		return
	}
	if len(o.line)+len(p) > MaxLine {
		o.line = o.line[:0]
		o.skip = true
		return
	}
	o.line = append(o.line, p...)
}

var (
	dataPrefix  = []byte("data:")
	eventPrefix = []byte("event:")
	startName   = []byte("message_start")
	deltaName   = []byte("message_delta")
	startData   = []byte(`{"type":"message_start"`)
	deltaData   = []byte(`{"type":"message_delta"`)
)

// event reads one stream line. The data line of a message_start or
// message_delta event — named so by the event line before it, or by the
// type its data begins with — updates the usage; every other line is
// passed over after a look at its first bytes.
func (o *observer) event(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) == 0 {
		o.named = false // the event ended
		return
	}
	if name, ok := bytes.CutPrefix(line, eventPrefix); ok {
		name = bytes.TrimSpace(name)
		o.named = bytes.Equal(name, startName) || bytes.Equal(name, deltaName)
		return
	}
	data, ok := bytes.CutPrefix(line, dataPrefix)
	if !ok {
		return
	}
	data = bytes.TrimLeft(data, " ")
	if !o.named && !bytes.HasPrefix(data, startData) && !bytes.HasPrefix(data, deltaData) {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message *struct {
			Model string    `json:"model"`
			Usage usageJSON `json:"usage"`
		} `json:"message"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "message_start" && ev.Message != nil:
		o.start = true
		o.model = ev.Message.Model
		ev.Message.Usage.apply(&o.tokens)
	case ev.Type == "message_delta" && ev.Usage != nil:
		// message_delta's counts are cumulative: they replace, never add.
		o.delta = true
		ev.Usage.apply(&o.tokens)
	}
}

// finish records what was read once the answer ends (eof) or is closed.
func (o *observer) finish(eof bool) {
	if o.finished {
		return
	}
	o.finished = true
	measured := o.start && o.delta
	if !o.sse && eof {
		measured = o.parseJSON()
	}
	o.mu.Lock()
	o.r.open = false
	o.r.model, o.r.tokens, o.r.measured = o.model, o.tokens, measured
	o.mu.Unlock()
	o.kept, o.tail, o.line, o.pending = nil, nil, nil, nil
}

// parseJSON reads the model and usage of a JSON answer read to its end.
func (o *observer) parseJSON() bool {
	var m struct {
		Model string     `json:"model"`
		Usage *usageJSON `json:"usage"`
	}
	if !o.over {
		if json.Unmarshal(o.kept, &m) != nil || m.Usage == nil {
			return false
		}
		o.model = m.Model
		m.Usage.apply(&o.tokens)
		return true
	}
	// Over MaxJSON: the model from the head (it comes before the content),
	// the usage from the tail (it comes after).
	o.model = headModel(o.kept)
	i := bytes.LastIndex(o.tail, []byte(`"usage":`))
	if i < 0 {
		return false
	}
	var u usageJSON
	if json.NewDecoder(bytes.NewReader(o.tail[i+len(`"usage":`):])).Decode(&u) != nil {
		return false
	}
	u.apply(&o.tokens)
	return true
}

// headModel reads the top-level "model" of a JSON object from its first
// bytes, stopping at the first member it cannot skip whole.
func headModel(head []byte) string {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		if k == "model" {
			var s string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return ""
}
