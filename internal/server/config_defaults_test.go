package server

import (
	"reflect"
	"testing"
	"time"
)

// TestDefaults_AreDefaultConfig holds Defaults to DefaultConfig: a zero
// Config takes every default from it, and a field already set is kept.
func TestDefaults_AreDefaultConfig(t *testing.T) {
	var c Config
	c.Defaults()
	if def := DefaultConfig(); !reflect.DeepEqual(c, def) {
		t.Errorf("Defaults() of a zero Config = %+v, want DefaultConfig() %+v", c, def)
	}
	c = Config{MaxBody: 5, ReadTimeout: time.Second, Broker: "den"}
	c.Defaults()
	if c.MaxBody != 5 || c.ReadTimeout != time.Second || c.Broker != "den" {
		t.Errorf("Defaults() changed set fields: MaxBody %d, ReadTimeout %v, Broker %q", c.MaxBody, c.ReadTimeout, c.Broker)
	}
	if c.Listen != "127.0.0.1:8787" || c.MaxBody != 5 || c.PoolRetryBody != 4<<20 || c.EgressMaxBody != 256<<20 {
		t.Errorf("Defaults() = Listen %q, PoolRetryBody %d, EgressMaxBody %d; want 127.0.0.1:8787, 4 MiB, 256 MiB", c.Listen, c.PoolRetryBody, c.EgressMaxBody)
	}
	if def := DefaultConfig(); def.MaxBody != 64<<20 {
		t.Errorf("DefaultConfig().MaxBody = %d, want 64 MiB", def.MaxBody)
	}
}
