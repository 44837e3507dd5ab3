package outbox

import (
	"context"
	"sync"

	"github.com/intentius/boxbroker/internal/store"
)

// Call is what one call served for a box leaves the outbox as it
// concludes: its settlement, held from when the spend meter settles the
// call (QueueCall) until the broker concludes it, so that the call's
// audit entry and settlement are journaled as one record, in one append
// (RecordCall), before the box has the end of its answer. A call that
// keeps no audit entry has its settlement journaled alone by Close.
//
// A Call is safe for concurrent use; its zero value is ready. Once
// closed (by RecordCall or Close) it holds nothing: a settlement queued
// after that is journaled at once, as one of a call with no Call is.
type Call struct {
	mu     sync.Mutex
	o      *Outbox // the outbox st goes to; nil: nothing held
	st     store.Settlement
	closed bool
}

// hold keeps st in c for o, and reports whether it did (c is not closed
// and holds nothing yet).
func (c *Call) hold(o *Outbox, st store.Settlement) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.o != nil {
		return false
	}
	c.o, c.st = o, st
	return true
}

// take closes c and returns what it held.
func (c *Call) take() (*Outbox, store.Settlement) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, st := c.o, c.st
	c.o, c.st, c.closed = nil, store.Settlement{}, true
	return o, st
}

// Close journals and queues the settlement c holds, if any, alone, and
// closes c. A nil *Call does nothing.
func (c *Call) Close() {
	if c == nil {
		return
	}
	if o, st := c.take(); o != nil {
		o.queue(nil, st)
	}
}

// RecordCall is Record for the audit entry e of call c: when c holds the
// call's settlement, both are journaled in one record and each is
// queued; c is closed. A nil c makes it Record.
func (o *Outbox) RecordCall(c *Call, e store.AuditEntry) {
	var held *Outbox
	var st store.Settlement
	if c != nil {
		held, st = c.take()
	}
	if held == nil {
		o.Record(e)
		return
	}
	if held != o {
		// Held for another outbox (one broker, one outbox: never).
		held.queue(nil, st)
		o.Record(e)
		return
	}
	seq := o.queue(&e, st)
	if !o.Audit.AddJournaled(e, seq) {
		o.Journal.ForgetPart(seq, PartAudit)
	}
}

// CallContext is a context carrying a Call, for QueueCall to find: its
// parent's values, deadline and cancellation, with Call. Kept inside
// what a request already allocates, it costs the request no allocation
// of its own. Context must be set before it is used.
type CallContext struct {
	context.Context
	Call Call
}

// callKey is the key CallContext answers its Call to.
type callKey struct{}

// Value is the context's Call for callKey, and its parent's values
// otherwise.
func (c *CallContext) Value(key any) any {
	if key == (callKey{}) {
		return &c.Call
	}
	return c.Context.Value(key)
}

// CallFrom is the Call ctx carries, or nil.
func CallFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}
