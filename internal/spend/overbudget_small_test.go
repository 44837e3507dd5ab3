package spend_test

import (
	"testing"

	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// TestOverBudget_SmallAmounts: a budget of a fraction of a cent refused
// before anything is charged says what is left and what the call could
// cost, each with the decimals the budget needs ($0.0000 beside $0.0005,
// never $0.00), and never that the budget was charged.
func TestOverBudget_SmallAmounts(t *testing.T) {
	tests := []struct {
		name string
		e    store.OverBudgetError
		bnd  int64
		want string
	}{
		{"nothing charged", store.OverBudgetError{Budget: store.Budget{Box: "salad", Limit: 500}, Month: "2026-12"}, 12_300,
			"This box's monthly budget of $0.0005 for 2026-12 is spent: what is left of it, $0.0005 ($0.0000 charged, $0.0000 held for calls in flight), is less than this call could cost up to $0.0123. " +
				"It resets on 2027-01-01 at 00:00 UTC; the owner can raise it with `boxbroker budget set salad AMOUNT`."},
		{"used up", store.OverBudgetError{Budget: store.Budget{Box: "salad", Limit: 500}, Month: "2026-12", Spent: 450, Reserved: 50}, 1,
			"This box's monthly budget of $0.0005 for 2026-12 is spent: $0.000450 charged and $0.000050 held for calls in flight, and this call could cost up to $0.000001. " +
				"It resets on 2027-01-01 at 00:00 UTC; the owner can raise it with `boxbroker budget set salad AMOUNT`."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spend.OverBudget(&tt.e, tt.bnd).Message; got != tt.want {
				t.Errorf("OverBudget() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
