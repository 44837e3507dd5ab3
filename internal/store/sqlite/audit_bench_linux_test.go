package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkAddAudit is storetest.BenchmarkAddAudit on a store in a
// temporary directory.
func BenchmarkAddAudit(b *testing.B) {
	storetest.BenchmarkAddAudit(b, func(b *testing.B) store.Audit {
		s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}

// BenchmarkAddFeedbackAtBound is storetest.BenchmarkAddFeedbackAtBound on
// a store in a temporary directory.
func BenchmarkAddFeedbackAtBound(b *testing.B) {
	storetest.BenchmarkAddFeedbackAtBound(b, func(b *testing.B) store.Store {
		s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	})
}
