package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// AuditView is one audit log entry (operator.AuditView).
type AuditView = operator.AuditView

// AuditList answers GET /api/audit, newest first.
type AuditList struct {
	Entries []AuditView `json:"entries"`
}

// GET /api/audit lists DefaultAuditList entries when the request names no
// limit, and at most MaxAuditList; its CSV export, GET /api/audit.csv,
// DefaultAuditExport and at most MaxAuditExport.
const (
	DefaultAuditList   = 100
	MaxAuditList       = 1000
	DefaultAuditExport = 10_000
	MaxAuditExport     = 100_000
)

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

func (s *Server) listAudit(r *http.Request) (AuditList, error) {
	q, err := s.auditQuery(r, DefaultAuditList, MaxAuditList)
	if err != nil {
		return AuditList{}, err
	}
	entries, err := s.op.ListAudit(r.Context(), q)
	return AuditList{Entries: entries}, operator.StoreError(err, "", "")
}
