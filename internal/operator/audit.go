package operator

import (
	"context"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// AuditView is one audit log entry.
type AuditView struct {
	ID int64 `json:"id"`
	// Box is null for a request no box's token was recognised on.
	Box        *string  `json:"box"`
	At         string   `json:"at"`
	Method     string   `json:"method"`
	Route      string   `json:"route"`
	Capability string   `json:"capability"`
	Words      []string `json:"words"`
	Status     int      `json:"status"`
	// Reason is why the broker refused the request; "" when it did not.
	Reason     string  `json:"reason"`
	Message    string  `json:"message"`
	DurationMs float64 `json:"durationMs"`
	// UpstreamStatus is the last upstream answer's status; null when no
	// upstream answered.
	UpstreamStatus *int `json:"upstreamStatus"`
	// PaidBy names the operator's credential pool entry that paid for
	// the call; null when none did.
	PaidBy *string `json:"paidBy"`
	// Bytes is the size of the answer's body as sent to the box.
	Bytes int64 `json:"bytes"`
	// USD is the measured cost of the request's model calls in dollars,
	// as the spend meter priced them; 0 when none was priced.
	USD float64 `json:"usd"`
}

// AuditViewOf is how the admin API shows e.
func AuditViewOf(e store.AuditEntry) AuditView {
	v := AuditView{
		ID: e.ID, At: formatTime(e.At), Method: e.Method, Route: e.Route, Capability: e.Capability,
		Words: e.Words, Status: e.Status, Reason: e.Reason, Message: e.Message,
		DurationMs: float64(e.Duration.Microseconds()) / 1000,
		Bytes:      e.Bytes, USD: spend.Dollars(e.Cost),
		Box: Optional(e.Box), PaidBy: Optional(e.PaidBy),
	}
	if v.Words == nil {
		v.Words = []string{}
	}
	if e.UpstreamStatus != 0 {
		u := e.UpstreamStatus
		v.UpstreamStatus = &u
	}
	return v
}

// ListAudit lists the audit entries q selects, newest first. Its error
// is the store's, as it is: a caller says it as its own (the admin API
// through StoreError).
func (s *Service) ListAudit(ctx context.Context, q store.AuditQuery) ([]AuditView, error) {
	entries, err := s.cfg.Store.ListAudit(ctx, q)
	return views(entries, AuditViewOf), err
}
