package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPool_OverloadsOfManyModelsAreBounded: a box naming a new model in
// each call (the model is its choice), each answered overloaded, keeps
// at most maxOverloads overloads apart on the entry; the rest are kept
// as one of an unknown model, and so is a model whose name is too long.
func TestPool_OverloadsOfManyModelsAreBounded(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	p := New(Config{Now: func() time.Time { return now }})
	for i := range 1000 {
		p.answered("a", "mallory", RouteMessages, fmt.Sprintf("claude-%d", i), 529, nil, nil)
	}
	p.answered("a", "mallory", RouteMessages, strings.Repeat("m", maxModel+1), 529, nil, nil)
	h := p.health["a"]
	if n := len(h.limits); n != maxOverloads+1 {
		t.Errorf("overloads kept = %d, want %d and one of an unknown model", n, maxOverloads+1)
	}
	if h.limits[Overloaded] == nil {
		t.Errorf("no overload of an unknown model kept past the bound")
	}
	// Once they cool for no one, new models are kept apart again.
	now = now.Add(CoolMax + time.Second)
	p.answered("a", "mallory", RouteMessages, "claude-new", 529, nil, nil)
	if h.limits[overloadKey("claude-new")] == nil {
		t.Errorf("a new model's overload after the others cooled is not kept apart")
	}
}
