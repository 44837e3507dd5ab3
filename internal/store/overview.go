package store

import (
	"context"
	"time"
)

// BoxActivity is what the audit log holds of one box since a time: its
// requests (every entry, served or refused; the owner's page's own
// actions, whose Capability is ActorAdmin, left out), its refusals by the
// broker, its upstream failures, when it was last served, and when it
// was last refused for its budget.
type BoxActivity struct {
	Box      string
	Requests int64
	// Refusals are the entries the broker refused: a Reason other than
	// the upstream's (ReasonUpstreamFailed, ReasonUpstreamUnusable).
	Refusals int64
	// Upstream are the entries the upstream failed (IsUpstreamFailure).
	Upstream int64
	// LastServed is the newest entry with no Reason; zero for none.
	LastServed time.Time
	// LastOverBudget is the newest refusal whose message says a budget is
	// spent (BudgetSpentMarker); zero for none.
	LastOverBudget time.Time
}

// ActorAdmin is the Capability of an audit entry that records an action
// taken on the owner's page rather than a box's request: the actor is the
// admin. Such entries are left out of every count in Overview.
const ActorAdmin = "admin"

// BudgetSpentMarker is the text every refusal for a spent budget holds
// (spend.OverBudget), by which the audit log tells them apart.
const BudgetSpentMarker = "could cost up to"

// HourCount is the requests, the broker's refusals and the upstream's
// failures of one hour (Hour is its start, UTC), counted as BoxActivity
// counts them.
type HourCount struct {
	Hour     time.Time
	Requests int64
	Refusals int64
	Upstream int64
}

// ReasonUpstreamFailed and ReasonUpstreamUnusable are the audit Reasons
// (capability.ReasonUpstreamFailed and capability.ReasonUpstream) of a
// request the upstream failed rather than the broker refused: it could
// not be reached or gave no answer, or answered with something the
// broker could not use.
const (
	ReasonUpstreamFailed   = "upstream failed"
	ReasonUpstreamUnusable = "upstream"
)

// IsUpstreamFailure reports whether an audit entry with reason and
// upstreamStatus is the upstream's failure rather than the broker's
// refusal or a call served: one of the upstream's Reasons, or no Reason
// and an upstream answer of 500 or over (an overload's 529, say). The
// stores' counts (BoxActivity.Upstream, HourCount.Upstream) count the
// same entries.
func IsUpstreamFailure(reason string, upstreamStatus int) bool {
	return reason == ReasonUpstreamFailed || reason == ReasonUpstreamUnusable || reason == "" && upstreamStatus >= 500
}

// RefusalGroup is the refusals that share a route, reason and message:
// how many, and the first and last time.
type RefusalGroup struct {
	Method  string
	Route   string
	Reason  string
	Message string
	Count   int64
	First   time.Time
	Last    time.Time
}

// BoxMonth is one box's measured spend in a month and its own budget:
// Measured is the cost of its priced calls and Calls how many calls were
// answered (micro-dollars, from the usage kept); Limit is its own budget
// when HasBudget; Spent and Reserved its own tally.
type BoxMonth struct {
	Box       string
	Measured  int64
	Calls     int64
	HasBudget bool
	Limit     int64
	Spent     int64
	Reserved  int64
}

// MonthTotal is a month's usage of every box summed: Usage's counts and
// Cost (its Box, Month, PayerKind, Principal and Model empty), and
// Charged, what the boxes' own tallies were charged (micro-dollars).
type MonthTotal struct {
	Usage   Usage
	Charged int64
}

// KeptDeclaration is a box's last report as Declaration returns it.
type KeptDeclaration struct {
	Doc []byte
	At  time.Time
}

// Overview reads what the owner's page shows of every box at once, each
// in one query, so that a list of a thousand boxes costs a few queries
// rather than a few per box.
type Overview interface {
	// BoxActivity returns every box's activity since since, for the boxes
	// with any; box "" (requests no box's token was recognised on) is
	// left out.
	BoxActivity(ctx context.Context, since time.Time) ([]BoxActivity, error)
	// AuditHours returns box's requests and refusals per hour since since,
	// oldest first, hours with none left out; box "" counts every entry.
	AuditHours(ctx context.Context, box string, since time.Time) ([]HourCount, error)
	// RefusalGroups returns box's refusals since since grouped by method,
	// route, reason and message, the most recent group first, at most
	// limit (positive) groups.
	RefusalGroups(ctx context.Context, box string, since time.Time, limit int) ([]RefusalGroup, error)
	// ListBoxPage returns one page of boxes, filtered, sorted and paged
	// as q says, each with its last report and month, in a few queries
	// whatever the number of boxes; an error for a q that fails Check.
	ListBoxPage(ctx context.Context, q BoxQuery) (BoxPage, error)
	// SecretNames returns the names of every box's secrets, each box's
	// by name; a box with none is absent.
	SecretNames(ctx context.Context) (map[string][]string, error)
	// AuditPage returns box's entries newest first, skipping offset and
	// at most limit (positive) of them.
	AuditPage(ctx context.Context, box string, offset, limit int) ([]AuditEntry, error)
	// FleetUsage returns every box's usage in month (YYYY-MM), each row
	// as ListUsage returns one with its Box, ordered by box, payer kind,
	// principal and model; none for a month with none.
	FleetUsage(ctx context.Context, month string) ([]Usage, error)
	// FleetTotal returns every box's usage in month (YYYY-MM) summed, and
	// the sum of the boxes' own tallies, each in one query and one row.
	FleetTotal(ctx context.Context, month string) (MonthTotal, error)
	// FleetTallies returns every box's tallies in month (YYYY-MM), each
	// as Tallies returns one, ordered by box and principal (the box's own,
	// Principal "", first); none for a month with none.
	FleetTallies(ctx context.Context, month string) ([]Tally, error)
}
