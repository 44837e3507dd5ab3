package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
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

// AuditList answers GET /api/audit, newest first.
type AuditList struct {
	Entries []AuditView `json:"entries"`
}

// ParseSince reads a since bound: a duration back from now ("1h", "30m")
// or an RFC 3339 time.
func ParseSince(v string, now time.Time) (time.Time, bool) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// AuditViewOf is how the admin API shows e.
func AuditViewOf(e store.AuditEntry) AuditView {
	v := AuditView{
		ID: e.ID, At: formatTime(e.At), Method: e.Method, Route: e.Route, Capability: e.Capability,
		Words: e.Words, Status: e.Status, Reason: e.Reason, Message: e.Message,
		DurationMs: float64(e.Duration.Microseconds()) / 1000,
		Bytes:      e.Bytes, USD: dollars(e.Cost),
		Box: optional(e.Box), PaidBy: optional(e.PaidBy),
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

// auditQuery reads GET /api/audit's query: box, since, refusals, limit
// (def when absent, at most most).
func (s *Server) auditQuery(r *http.Request, def, most int) (store.AuditQuery, error) {
	q := r.URL.Query()
	aq := store.AuditQuery{Box: q.Get("box")}
	if aq.Box != "" && !protocol.IsBoxName(aq.Box) {
		return aq, operator.Errorf(operator.Invalid, "box is a box name, ^[a-z][a-z0-9-]{0,62}$.")
	}
	if v := q.Get("since"); v != "" {
		t, ok := ParseSince(v, s.cfg.Now())
		if !ok {
			return aq, operator.Errorf(operator.Invalid, "since is a duration back from now, such as 1h or 30m, or an RFC 3339 time.")
		}
		aq.Since = t
	}
	if v := q.Get("refusals"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return aq, operator.Errorf(operator.Invalid, "refusals is true or false.")
		}
		aq.RefusalsOnly = b
	}
	n, err := limit(r, def, most)
	aq.Limit = n
	return aq, err
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) error {
	q, err := s.auditQuery(r, 100, 1000)
	if err != nil {
		return err
	}
	entries, err := s.cfg.Store.ListAudit(r.Context(), q)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := AuditList{Entries: make([]AuditView, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, AuditViewOf(e))
	}
	return writeJSON(w, http.StatusOK, out)
}
