package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
)

// DeadLetters are the batches of records (settlements, audit entries)
// the store refused for good, set aside in a data directory (package
// outbox's dead letters): *outbox.Outbox, this replica's, is one.
type DeadLetters interface {
	ListDead() ([]outbox.Dead, error)
	RetryDead(ctx context.Context, id string) (outbox.Dead, error)
	DropDead(id string) (outbox.Dead, error)
}

// DeadLetterView is a dead letter as the admin API shows it: what it
// holds, counted, never its records' contents.
type DeadLetterView struct {
	// ID is the batch's key; a prefix of it that names one letter only
	// serves too.
	ID string `json:"id"`
	// At is when it was set aside, Reason the store's refusal.
	At     string `json:"at"`
	Reason string `json:"reason"`
	// Settlements and AuditEntries count what it holds, and Boxes name
	// the boxes they are of.
	Settlements  int      `json:"settlements"`
	AuditEntries int      `json:"auditEntries"`
	Boxes        []string `json:"boxes"`
}

// DeadLetterList is the answer to GET /api/spool/dead.
type DeadLetterList struct {
	DeadLetters []DeadLetterView `json:"deadLetters"`
}

// DeadLetterViewOf is d as the admin API shows it.
func DeadLetterViewOf(d outbox.Dead) DeadLetterView {
	boxes := []string{}
	for _, st := range d.Batch.Settle {
		boxes = append(boxes, st.Box)
	}
	for _, e := range d.Batch.Audit {
		if e.Box != "" {
			boxes = append(boxes, e.Box)
		}
	}
	slices.Sort(boxes)
	return DeadLetterView{ID: d.ID, At: d.At.UTC().Format(time.RFC3339Nano), Reason: d.Reason,
		Settlements: len(d.Batch.Settle), AuditEntries: len(d.Batch.Audit), Boxes: slices.Compact(boxes)}
}

// deadLetters are s's dead letters, or NotImplemented.
func (s *Service) deadLetters() (DeadLetters, error) {
	if s.cfg.DeadLetters == nil {
		return nil, Errorf(NotImplemented, "This broker keeps no dead letters here.")
	}
	return s.cfg.DeadLetters, nil
}

// ListDeadLetters returns the dead letters, oldest first.
func (s *Service) ListDeadLetters(ctx context.Context) ([]DeadLetterView, error) {
	d, err := s.deadLetters()
	if err != nil {
		return nil, err
	}
	return DeadLetterViews(d)
}

// DeadLetterViews lists d's dead letters as the admin API shows them,
// oldest first. It needs no store: `spool dead list` on a data directory
// uses it when the store, which the letters wait for, does not open.
func DeadLetterViews(d DeadLetters) ([]DeadLetterView, error) {
	list, err := d.ListDead()
	if err != nil {
		return nil, err
	}
	return views(list, DeadLetterViewOf), nil
}

// RetryDeadLetter applies the dead letter id to the store and removes it
// once the store took it. NotFound for none, Conflict when the store
// refuses it again (it is kept, and the message gives the store's
// reason) or it is another store's.
func (s *Service) RetryDeadLetter(ctx context.Context, id string) (DeadLetterView, error) {
	d, err := s.deadLetters()
	if err != nil {
		return DeadLetterView{}, err
	}
	x, err := d.RetryDead(ctx, id)
	if err != nil {
		return DeadLetterView{}, deadError(err)
	}
	v := DeadLetterViewOf(x)
	msg := fmt.Sprintf("applied dead letter %s to the store (%d settlements, %d audit entries)", v.ID, v.Settlements, v.AuditEntries)
	if err := s.done(ctx, "", http.StatusOK, msg, "dead_letter", v.ID); err != nil {
		return DeadLetterView{}, err
	}
	return v, nil
}

// DropDeadLetter removes the dead letter id, giving up its records.
// NotFound for none.
func (s *Service) DropDeadLetter(ctx context.Context, id string) error {
	d, err := s.deadLetters()
	if err != nil {
		return err
	}
	x, err := d.DropDead(id)
	if err != nil {
		return deadError(err)
	}
	msg := fmt.Sprintf("dropped dead letter %s, giving up %d settlements and %d audit entries", x.ID, len(x.Batch.Settle), len(x.Batch.Audit))
	return s.done(ctx, "", http.StatusNoContent, msg, "dead_letter", x.ID)
}

// deadError maps a dead letter's error to a refusal: none with that ID
// (NotFound), another store's or the store refusing it again (Conflict,
// with its reason), the store not answering (Unavailable).
func deadError(err error) error {
	var fe *outbox.ForeignError
	switch {
	case errors.Is(err, outbox.ErrNoDead):
		return Errorf(NotFound,
			"No dead letter has that ID here (or it begins more than one): `boxbroker spool dead list` (GET /api/spool/dead) lists them.")
	case errors.As(err, &fe):
		return Errorf(Conflict, "That dead letter belongs to another store (identity %s); it is kept.", fe.Theirs)
	case outbox.Refused(err):
		return Errorf(Conflict,
			"The store refused the batch again, and it is kept: %s. Fix what the store refuses, or drop it.", safeReason(err))
	}
	return StoreError(err, "", "")
}

// safeReason is the store's refusal, cut short: the driver's message
// names tables and columns, never a value.
func safeReason(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// DeadDir is the dead letters of the data directory Dir, retried into
// Store: what a process that does not own the spool (the CLI) acts on.
type DeadDir struct {
	Dir   string
	Store interface {
		store.Spooled
		Identity(ctx context.Context) (string, error)
	}
}

var _ DeadLetters = DeadDir{}

// ListDead is outbox.ListDead of d's directory.
func (d DeadDir) ListDead() ([]outbox.Dead, error) { return outbox.ListDead(d.Dir) }

// RetryDead is outbox.RetryDead of d's directory into d's store, which
// it refuses for a letter of another store.
func (d DeadDir) RetryDead(ctx context.Context, id string) (outbox.Dead, error) {
	identity, err := d.Store.Identity(ctx)
	if err != nil {
		return outbox.Dead{}, err
	}
	return outbox.RetryDead(ctx, d.Dir, d.Store, identity, id)
}

// DropDead is outbox.DropDead of d's directory.
func (d DeadDir) DropDead(id string) (outbox.Dead, error) { return outbox.DropDead(d.Dir, id) }
