package brokertest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store/postgres/postgrestest"
)

// MasterKey is a fresh master key, hex, as BOXBROKER_MASTER_KEY takes it.
func MasterKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

// Replicas starts two brokers as two replicas of one deployment: one
// fresh PostgreSQL schema (postgrestest.Schema, which skips the test
// where no PostgreSQL can be had) and one master key, each with its own
// data directory. opt is as for New; its Config, when set, runs after
// the store and the master key are set.
func Replicas(t testing.TB, opt Options) (one, two *Broker) {
	t.Helper()
	dsn, key := postgrestest.Schema(t), MasterKey(t)
	config := opt.Config
	opt.Config = func(c *server.Config) {
		c.Store = dsn
		c.MasterKey = key
		if config != nil {
			config(c)
		}
	}
	return New(t, opt), New(t, opt)
}
