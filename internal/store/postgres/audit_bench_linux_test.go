package postgres

import (
	"context"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkAddAudit is storetest.BenchmarkAddAudit on a fresh schema.
func BenchmarkAddAudit(b *testing.B) {
	storetest.BenchmarkAddAudit(b, func(b *testing.B) store.Audit {
		s, err := Open(context.Background(), postgrestest.Schema(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

// BenchmarkApplySpooled is storetest.BenchmarkApplySpooled on a fresh
// schema.
func BenchmarkApplySpooled(b *testing.B) {
	storetest.BenchmarkApplySpooled(b, benchStore)
}

// BenchmarkSettle is storetest.BenchmarkSettle on a fresh schema.
func BenchmarkSettle(b *testing.B) {
	storetest.BenchmarkSettle(b, benchStore)
}

// BenchmarkAddFeedbackAtBound is storetest.BenchmarkAddFeedbackAtBound on
// a fresh schema.
func BenchmarkAddFeedbackAtBound(b *testing.B) {
	storetest.BenchmarkAddFeedbackAtBound(b, benchStore)
}

// benchStore is a store on a fresh schema, closed when b ends.
func benchStore(b *testing.B) store.Store {
	s, err := Open(context.Background(), postgrestest.Schema(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
