package spend

import (
	"bytes"
	"io"
	"sync"
)

// MaxLine is the longest stream line kept; a longer one is skipped
// (message_start and message_delta lines are a few hundred bytes).
const MaxLine = 256 << 10

// MaxAnswer is the longest JSON answer whose usage is read: it is kept as
// it passes and parsed at its end. A longer one is not kept, and is
// recorded as unmeasured. (A Messages answer of 128,000 output tokens is
// near 1 MiB.)
const MaxAnswer = 4 << 20

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
	// entry names the entry of the operator's credential pool the call
	// was paid by ("" for none).
	entry string
	// sent is the credential the call carried (its x-api-key, or its
	// bearer), which a model the answer names must not hold to be kept;
	// held in memory until the call settles, never written.
	sent string
	// earlier are the credentials of the pool entries the call failed
	// over from (proxy.EarlierFrom), held as sent is: the upstream saw
	// them too.
	earlier []string
}

// observer wraps an answer's body and reads the usage in the bytes as the
// reader takes them: it never holds bytes back and never reads ahead, and
// it looks at each read's bytes only once the reader has passed them on
// (a JSON answer's are only copied as they pass, and read at its end).
// Memory is bounded: one read's bytes, and a partial line for a stream
// (at most MaxLine), or the answer for a JSON answer (at most MaxAnswer).
// The usage is recorded when the body is closed.
type observer struct {
	body io.ReadCloser
	sse  bool
	mu   *sync.Mutex // the ticket's; guards *r
	r    *reading
	// bufs holds buffers for reuse (nil: each is made anew).
	bufs *bufPool

	// Stream state: line holds a partial line; skip is true while the
	// rest of an over-long line is passed over.
	line         []byte
	skip         bool
	named        bool // the event under way is named message_start or message_delta
	start, delta bool
	model        string
	tokens       Tokens
	// JSON state: answer holds the answer so far; long is true once it
	// is over MaxAnswer, and no longer kept.
	answer   *[]byte
	long     bool
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
	switch {
	case n == 0 || o.finished:
	case !o.sse:
		// A JSON answer is only kept as it passes (it is read at its
		// end): its bytes go straight to the pooled answer, with no
		// copy in pending.
		o.observeJSON(p[:n])
	default:
		o.pending = append(o.pending[:0], p[:n]...)
	}
	if err == io.EOF {
		o.eof = true
	}
	return n, err
}

// catchUp observes the stream's bytes the last Read handed on (a JSON
// answer's are kept as Read hands them on, and leave none pending).
func (o *observer) catchUp() {
	if len(o.pending) == 0 || o.finished {
		return
	}
	o.observeStream(o.pending)
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
	if o.long {
		return
	}
	if o.answer == nil {
		o.answer = o.bufs.get(0)
	}
	if len(*o.answer)+len(p) > MaxAnswer {
		o.bufs.put(o.answer)
		o.answer, o.long = nil, true
		return
	}
	*o.answer = append(*o.answer, p...)
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
	e, ok := readEvent(data)
	if !ok {
		return
	}
	switch {
	case e.typ == "message_start" && e.message:
		o.start = true
		o.model = e.msg.model
		e.msg.usage.tokens(&o.tokens)
	case e.typ == "message_delta" && e.usage.set:
		// message_delta's counts are cumulative: they replace, never add.
		o.delta = true
		e.usage.tokens(&o.tokens)
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
	o.bufs.put(o.answer)
	o.answer, o.line, o.pending = nil, nil, nil
}

// parseJSON reads the model and usage of a JSON answer read to its end
// (see readAnswer). It reports false when the answer is empty, over
// MaxAnswer, not JSON, or has no usage.
func (o *observer) parseJSON() bool {
	if o.answer == nil {
		return false
	}
	model, u, ok := readAnswer(*o.answer)
	if !ok {
		return false
	}
	o.model = model
	u.tokens(&o.tokens)
	return true
}
