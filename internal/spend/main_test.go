package spend_test

import (
	"os"
	"testing"

	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

func TestMain(m *testing.M) { os.Exit(postgrestest.Main(m)) }
