package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/operator"
)

// goneActions is a backend whose removals all meet a NotFound refusal
// whose message is none the service writes: the CLI must know it by its
// code.
type goneActions struct{ operator.Actions }

var errGone = &operator.Error{Code: operator.NotFound, Message: "Nothing by that name here."}

func (goneActions) RemoveBudget(context.Context, string, string) error               { return errGone }
func (goneActions) RemoveRateLimit(context.Context, string, string) error            { return errGone }
func (goneActions) RemoveWindowBudget(context.Context, string, string, string) error { return errGone }

// TestCLI_NotFoundIsACodeNotAMessage removes a budget, a window budget
// and a rate limit that are not there, on a backend whose refusal says
// so in words the CLI has never seen, and through an admin API answering
// 404 in such words: each says "there is no ...", as it does for the
// service's own words. A check of the message would miss them.
func TestCLI_NotFoundIsACodeNotAMessage(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"type":"error","error":{"type":"not_found_error","message":"Nothing by that name here."}}`))
	}))
	defer api.Close()
	cl, err := adminclient.New(api.URL, "adm-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.RemoveBudget(context.Background(), "salad", ""); operator.CodeOf(err) != operator.NotFound {
		t.Errorf("RemoveBudget through a 404 = %v, code %d; want code NotFound", err, operator.CodeOf(err))
	}
	ctx := context.Background()
	for _, be := range []*backend{{Actions: goneActions{}}, {Actions: cl}} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out}
		tests := []struct {
			name string
			run  func() error
			want string
		}{
			{"budget", func() error { return runBudgetOn(ctx, c, be, "remove", "salad", "", "", "", 0) }, "there is no box salad's own budget: Nothing by that name here."},
			{"window", func() error { return runBudgetOn(ctx, c, be, "remove", "salad", "", "", "day", 0) }, "there is no box salad's own daily budget: Nothing by that name here."},
			{"limit", func() error {
				return runLimitOn(ctx, c, be, "remove", operator.RateLimitView{}, "salad", "", "box salad's own rate limit")
			}, "there is no box salad's own rate limit: Nothing by that name here."},
		}
		for _, tt := range tests {
			err := tt.run()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("%s remove on %T = %v, want %q", tt.name, be.Actions, err, tt.want)
			}
		}
	}
}
