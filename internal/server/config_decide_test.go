package server

import (
	"strings"
	"testing"
	"time"
)

func TestConfig_DecideTimeout(t *testing.T) {
	var c Config
	c.Defaults()
	if c.DecideTimeout != 30*time.Second {
		t.Errorf("Defaults() DecideTimeout = %v, want 30s", c.DecideTimeout)
	}
	c.DecideTimeout = -time.Second
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "durations must not be negative") {
		t.Errorf("Validate() with a negative DecideTimeout = %v, want a refusal", err)
	}
}
