package admin_test

import (
	"os"
	"testing"

	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// TestMain stops the throwaway PostgreSQL cluster a replicas test started.
func TestMain(m *testing.M) {
	os.Exit(postgrestest.Main(m))
}
