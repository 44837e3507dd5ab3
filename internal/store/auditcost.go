package store

import (
	"context"
	"time"
)

// DayCost is one UTC day of a box's audit log: the measured cost of its
// requests in micro-dollars (the sum of their entries' Cost) and how many
// of its entries had a cost.
type DayCost struct {
	// Day is the day's start, UTC.
	Day   time.Time
	Cost  int64
	Calls int64
}

// AuditCosts reads the cost the audit log records per request, summed by
// day, for the owner's page's spend picture.
type AuditCosts interface {
	// AuditDays returns box's measured cost per UTC day since since,
	// oldest first, days with no cost left out.
	AuditDays(ctx context.Context, box string, since time.Time) ([]DayCost, error)
}
