package sqlite

import (
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkAddAudit is storetest.BenchmarkAddAudit on a store in a
// temporary directory.
func BenchmarkAddAudit(b *testing.B) {
	storetest.BenchmarkAddAudit(b, func(b *testing.B) store.Audit { return benchStore(b) })
}

// BenchmarkAddFeedbackAtBound is storetest.BenchmarkAddFeedbackAtBound on
// a store in a temporary directory.
func BenchmarkAddFeedbackAtBound(b *testing.B) {
	storetest.BenchmarkAddFeedbackAtBound(b, benchStore)
}
