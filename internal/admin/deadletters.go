package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/store"
)

// DeadLetters are the batches of records (settlements, audit entries)
// the store refused for good, set aside in this replica's data directory
// (package outbox's dead letters): *outbox.Outbox is one.
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

// DeadLetterRoutes are the admin API's routes over d, which the server
// adds with Handle:
//
//	GET    /api/spool/dead             list them, oldest first
//	POST   /api/spool/dead/{id}/retry  apply one to the store now; removed once taken
//	DELETE /api/spool/dead/{id}        drop one, giving up its records
func DeadLetterRoutes(d DeadLetters) []Route {
	return []Route{
		{Pattern: "GET /api/spool/dead", Handle: func(w http.ResponseWriter, r *http.Request) error {
			list, err := d.ListDead()
			if err != nil {
				return err
			}
			out := DeadLetterList{DeadLetters: []DeadLetterView{}}
			for _, x := range list {
				out.DeadLetters = append(out.DeadLetters, DeadLetterViewOf(x))
			}
			return writeJSON(w, http.StatusOK, out)
		}},
		{Pattern: "POST /api/spool/dead/{id}/retry", Handle: func(w http.ResponseWriter, r *http.Request) error {
			x, err := d.RetryDead(r.Context(), r.PathValue("id"))
			if err != nil {
				return deadError(err, x)
			}
			return writeJSON(w, http.StatusOK, DeadLetterViewOf(x))
		}},
		{Pattern: "DELETE /api/spool/dead/{id}", Handle: func(w http.ResponseWriter, r *http.Request) error {
			if _, err := d.DropDead(r.PathValue("id")); err != nil {
				return deadError(err, outbox.Dead{})
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}},
	}
}

// deadError maps a dead letter's error to a refusal: none with that ID
// (404), the store refusing it again (409, with its reason), the store
// not answering (503).
func deadError(err error, x outbox.Dead) error {
	var fe *outbox.ForeignError
	switch {
	case errors.Is(err, outbox.ErrNoDead):
		return operator.Errorf(operator.NotFound,
			"No dead letter has that ID here (or it begins more than one): GET /api/spool/dead lists them.")
	case errors.As(err, &fe):
		return operator.Errorf(operator.Conflict,
			"That dead letter belongs to another store (identity %s); it is kept.", fe.Theirs)
	case outbox.Refused(err):
		return operator.Errorf(operator.Conflict,
			"The store refused the batch again, and it is kept: %s. Fix what the store refuses, or drop it.", safeReason(err))
	case errors.Is(err, store.ErrUnavailable):
		return operator.StoreUnavailable(err)
	}
	return err
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
