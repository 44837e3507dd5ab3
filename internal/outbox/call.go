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
	closed bool
	// st is the settlement held, and entry the call's audit entry once
	// RecordCall has it: kept here, where the call already is (in the
	// request's one allocation), they are encoded with no copy of their
	// own on the heap.
	st    store.Settlement
	entry store.AuditEntry
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
	c.st.Reservation = 0 // a call queued reserved nothing
	return true
}

// close closes c and returns the outbox of the settlement it holds (in
// c.st), nil when none. Once closed, c's fields are only its caller's.
func (c *Call) close() *Outbox {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.o
	c.o, c.closed = nil, true
	return o
}

// Close journals and queues the settlement c holds, if any, alone, and
// closes c. A nil *Call does nothing.
func (c *Call) Close() {
	if c == nil {
		return
	}
	if o := c.close(); o != nil {
		o.queue(nil, &c.st)
		c.st = store.Settlement{}
	}
}

// RecordCall journals e, the audit entry of call c, and queues it to be
// written, before the box has the end of its answer: when c holds the
// call's settlement, both are journaled in one record and each is
// queued; c is closed (c may be nil). A journal that cannot write says
// so in Err; an entry dropped from a full queue is counted, and
// forgotten by the journal.
func (o *Outbox) RecordCall(c *Call, e store.AuditEntry) {
	var seq uint64
	if c == nil {
		seq, _ = o.Journal.Audit(e)
	} else {
		held := c.close()
		c.entry = e
		defer func() { c.entry, c.st = store.AuditEntry{}, store.Settlement{} }()
		switch held {
		case o:
			seq = o.queue(&c.entry, &c.st)
		case nil:
			seq, _ = o.Journal.Call(&c.entry, nil)
		default:
			// Held for another outbox (one broker has one outbox: never).
			held.queue(nil, &c.st)
			seq, _ = o.Journal.Call(&c.entry, nil)
		}
	}
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
