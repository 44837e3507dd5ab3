package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/sqlite"
)

// stuckLog is a store whose change log, once stuck, answers no poll until
// the test ends: a broker's cache then goes on answering from memory for
// its staleness bound (100 ms) after its last poll, and no longer.
type stuckLog struct {
	store.Store
	mu    sync.Mutex
	stuck chan struct{} // nil until stuck; closed as the test ends
}

func (s *stuckLog) stick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stuck = make(chan struct{})
}

func (s *stuckLog) unstick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stuck != nil {
		close(s.stuck)
		s.stuck = nil
	}
}

func (s *stuckLog) ChangesSince(ctx context.Context, after int64, limit int) ([]store.Change, error) {
	s.mu.Lock()
	ch := s.stuck
	s.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.ChangesSince(ctx, after, limit)
}

// TestCLI_BudgetInForceAtTheNextCall: `budget set` returns only once no
// running broker can still answer from memory that the box has no
// budget, so the call after it is held. The attack: the broker has just
// read that the box has none, and its change log is then stuck, so its
// memory says "no budget" for up to 100 ms after the write; a command
// that returned at its commit let the next call through unreserved (and
// this test failed so before the command waited).
func TestCLI_BudgetInForceAtTheNextCall(t *testing.T) {
	dir := t.TempDir()
	sq, err := sqlite.Open(filepath.Join(dir, server.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	st := &stuckLog{Store: sq}
	t.Cleanup(st.unstick)
	b := brokertest.New(t, brokertest.Options{Store: st, Config: func(c *server.Config) { c.DataDir = dir }})
	token := b.AddBox("salad")
	b.Report(token, brokertest.Entry("inference", "agent"))
	b.SetCredential("anthropic", "sk-ant-api03-BUDGETFORCE")
	call := func() brokertest.Response {
		return b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"claude-haiku-4-5","max_tokens":10}`), nil)
	}
	b.Sync() // memory is fresh from now
	if r := call(); r.StatusCode != 200 {
		t.Fatalf("call before any budget = %d %s", r.StatusCode, r.Body)
	}
	st.stick() // memory holds "no budget" until its bound runs out
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "0.000001"); code != 0 {
		t.Fatalf("budget set = %d %q", code, errs)
	}
	r := call()
	if _, msg := brokertest.Refusal(r.Body); r.StatusCode != 403 || !strings.Contains(msg, "monthly budget of $0.000001") {
		t.Errorf("the call after budget set returned = %d %q, want 403 naming the budget", r.StatusCode, r.Body)
	}
}
