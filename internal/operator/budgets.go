package operator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// BudgetView is one monthly budget, in dollars, and where it stands: the
// box's own (principal null) or that of the calls one principal pays for.
type BudgetView struct {
	Principal *string `json:"principal"`
	USD       float64 `json:"usd"`
	Spent     float64 `json:"spent"`
	Held      float64 `json:"held"`
	Left      float64 `json:"left"`
	UpdatedAt string  `json:"updatedAt"`
}

// BudgetList answers GET /api/boxes/{name}/budgets: the month (UTC), when
// its tallies reset, and the box's budgets, its own first.
type BudgetList struct {
	Month   string       `json:"month"`
	Resets  string       `json:"resets"`
	Budgets []BudgetView `json:"budgets"`
}

// BudgetSetting is the body of PUT /api/boxes/{name}/budgets: a monthly
// limit in dollars (at most six decimals), for the box itself (principal
// null or absent) or for the calls one principal pays for.
type BudgetSetting struct {
	USD       json.Number `json:"usd"`
	Principal *string     `json:"principal"`
}

// BudgetPrincipal checks a budget's principal: nil or "" for the box's own.
func BudgetPrincipal(p *string) (string, error) {
	if p == nil || *p == "" {
		return "", nil
	}
	if !protocol.IsPrincipal(*p) {
		return "", Errorf(Invalid,
			"A budget's principal is null (the box's own budget) or 1 to 200 characters with no white space, such as github:<login>.")
	}
	return *p, nil
}

// NoBudget says box has no such budget.
func NoBudget(box, principal string) string {
	if principal == "" {
		return "Box " + box + " has no budget of its own."
	}
	return "Box " + box + " has no budget for " + principal + "."
}

// limitOf checks the box and the principal (BudgetPrincipal) a budget or
// a rate limit names, and returns the principal.
func limitOf(box string, p *string) (string, error) {
	if err := CheckBoxName(box); err != nil {
		return "", err
	}
	return BudgetPrincipal(p)
}

// parseUSD reads a budget's limit in dollars (spend.ParseUSD).
func parseUSD(usd json.Number) (int64, error) {
	limit, err := spend.ParseUSD(usd.String())
	if err != nil {
		return 0, Errorf(Invalid,
			"usd is a budget in dollars from 0 to %d with at most six decimals, such as 25 or 25.50.", spend.MaxUSD)
	}
	return limit, nil
}

// setBudgetMessage is the audit log's message for setting the budget
// over what ("monthly", "daily" ...) of the box (principal "") or of
// principal to limit.
func setBudgetMessage(what, principal string, limit int64) string {
	if principal == "" {
		return "set the box's " + what + " budget to " + spend.FormatUSD(limit)
	}
	return "set the " + what + " budget for " + principal + " to " + spend.FormatUSD(limit)
}

func budgetView(b spend.BudgetStatus) BudgetView {
	return BudgetView{Principal: Optional(b.Principal), USD: spend.Dollars(b.Limit), Spent: spend.Dollars(b.Spent),
		Held: spend.Dollars(b.Reserved), Left: spend.Dollars(b.Left), UpdatedAt: formatTime(b.UpdatedAt)}
}

// Optional is s as a JSON view's optional string: nil (null) for "".
func Optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Budgets returns box's budgets and where they stand in month (YYYY-MM;
// "" for this month, UTC). Invalid for a bad month, NotFound for no such
// box.
func (s *Service) Budgets(ctx context.Context, box, month string) (BudgetList, error) {
	if err := CheckBoxName(box); err != nil {
		return BudgetList{}, err
	}
	month, err := s.Month(month)
	if err != nil {
		return BudgetList{}, err
	}
	bs, err := spend.Budgets(ctx, s.cfg.Store, box, month)
	if err != nil {
		return BudgetList{}, StoreError(err, NoBox(box), "")
	}
	return BudgetList{Month: month, Resets: formatTime(spend.Resets(month)), Budgets: views(bs, budgetView)}, nil
}

// SetBudget sets box's own monthly budget, or set's principal's on it,
// and returns it as it stands this month, once the box's next call is
// held to it. Invalid for a bad principal or amount, NotFound for no
// such box.
func (s *Service) SetBudget(ctx context.Context, box string, set BudgetSetting) (BudgetView, error) {
	principal, err := limitOf(box, set.Principal)
	if err != nil {
		return BudgetView{}, err
	}
	limit, err := parseUSD(set.USD)
	if err != nil {
		return BudgetView{}, err
	}
	b := store.Budget{Box: box, Principal: principal, Limit: limit, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetBudget(ctx, b); err != nil {
		return BudgetView{}, StoreError(err, NoBox(box), "")
	}
	if err := s.wrote(ctx, store.ChangeBudget, box, box, http.StatusOK, setBudgetMessage("monthly", principal, limit)); err != nil {
		return BudgetView{}, err
	}
	list, err := spend.Budgets(ctx, s.cfg.Store, box, spend.Month(s.cfg.Now()))
	if err != nil {
		return BudgetView{}, StoreError(err, NoBox(box), "")
	}
	for _, bst := range list {
		if bst.Principal == principal {
			return budgetView(bst), nil
		}
	}
	// Removed again between the two reads.
	return BudgetView{}, Errorf(NotFound, "%s (It was removed meanwhile.)", NoBudget(box, principal))
}

// RemoveBudget removes box's own monthly budget (principal "") or
// principal's on it; the calls it held are still measured, and no longer
// limited. NotFound for no such box or budget.
func (s *Service) RemoveBudget(ctx context.Context, box, principal string) error {
	if _, err := limitOf(box, &principal); err != nil {
		return err
	}
	err := s.cfg.Store.DeleteBudget(ctx, box, principal)
	if errors.Is(err, store.ErrNotFound) {
		if _, berr := s.cfg.Store.Box(ctx, box); errors.Is(berr, store.ErrNotFound) {
			return StoreError(berr, NoBox(box), "")
		}
	}
	if err != nil {
		return StoreError(err, NoBudget(box, principal), "")
	}
	msg := "removed the box's monthly budget"
	if principal != "" {
		msg = "removed the monthly budget for " + principal
	}
	return s.wrote(ctx, store.ChangeBudget, box, box, http.StatusNoContent, msg)
}
