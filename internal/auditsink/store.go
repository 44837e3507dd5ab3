package auditsink

import (
	"context"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
)

// Store is the part of a store the audit log is written through: the
// outbox's.
type Store = outbox.Store

// Wrap returns st with every audit row written through it appended to
// s's backlog first, under the batch's key (a new key for a write that
// has none), so a row is streamed even when the store does not take it,
// and a batch written again carries its key again. The records of a
// batch the store refused whole, applied again one by one, are not
// appended again (outbox.PartOf). A nil Sink returns
// st itself.
func (s *Sink) Wrap(st Store) Store {
	if s == nil {
		return st
	}
	return tee{Store: st, s: s}
}

type tee struct {
	Store
	s *Sink
}

func (t tee) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	t.append(outbox.NewKey(), entries)
	return t.Store.AddAudit(ctx, entries)
}

// ApplySpooled appends audit under key, unless the batch is a record of a
// batch the store refused whole, applied alone (outbox.PartOf): its row
// was appended with that batch, under that batch's key.
func (t tee) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	if _, ok := outbox.PartOf(ctx); !ok {
		t.append(key, audit)
	}
	return t.Store.ApplySpooled(ctx, key, settle, audit)
}

// append appends entries to the backlog; a backlog that cannot be
// written is logged, and the store is written all the same.
func (t tee) append(key string, entries []store.AuditEntry) {
	if err := t.s.Append(key, entries); err != nil {
		t.s.log.Warn("audit sink: rows not kept for the sink", "rows", len(entries), "err", err)
	}
}

// WrapAll returns st with its audit rows written through Wrap, for the
// admin API and the owner's page, whose actions are audited through the
// store itself; everything else goes to st unchanged. A nil Sink
// returns st itself.
func (s *Sink) WrapAll(st store.Store) store.Store {
	if s == nil {
		return st
	}
	return all{Store: st, t: tee{Store: st, s: s}}
}

type all struct {
	store.Store
	t tee
}

func (a all) AddAudit(ctx context.Context, entries []store.AuditEntry) error {
	return a.t.AddAudit(ctx, entries)
}

func (a all) ApplySpooled(ctx context.Context, key string, settle []store.Settlement, audit []store.AuditEntry) (bool, error) {
	return a.t.ApplySpooled(ctx, key, settle, audit)
}
