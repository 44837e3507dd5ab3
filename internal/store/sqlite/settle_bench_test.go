package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/storetest"
)

// BenchmarkSettle is storetest.BenchmarkSettle on a file.
func BenchmarkSettle(b *testing.B) {
	storetest.BenchmarkSettle(b, benchStore)
}

// BenchmarkApplySpooled is storetest.BenchmarkApplySpooled on a file.
func BenchmarkApplySpooled(b *testing.B) {
	storetest.BenchmarkApplySpooled(b, benchStore)
}

// benchStore is a store on a new file in b's temporary directory, closed
// when b ends.
func benchStore(b *testing.B) store.Store {
	s, err := Open(filepath.Join(b.TempDir(), "boxbroker.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
