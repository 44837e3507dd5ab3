package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/webhook"
)

// Budget alerts: when what a budget has charged crosses a threshold the
// operator sets (a percentage of its limit, such as 80), the Alerter
// logs it, counts it (boxbroker_budget_alerts_total), keeps it in the
// store for the owner's page, and, with a webhook set, posts it there as
// JSON signed with HMAC-SHA256. Each crossing is alerted once, whichever
// replica saw it: the store records it first (store.Alerts.MarkAlert).

// AlertStore is what the Alerter reads and writes.
type AlertStore interface {
	Reader
	WindowTallies(ctx context.Context, box string, at time.Time) ([]store.WindowTally, error)
	store.Alerts
}

// AlertConfig configures an Alerter.
type AlertConfig struct {
	// Store keeps the budgets and the alerts given. Required.
	Store AlertStore
	// Thresholds are the percentages of a budget's limit that alert,
	// each from 1 to 1000. None: no Alerter is needed.
	Thresholds []int
	// Webhook, when set, receives each alert as a POST of JSON (see
	// AlertEvent), signed with WebhookKey as package webhook signs, tried
	// up to four times.
	Webhook    *url.URL
	WebhookKey []byte
	// Client posts to the webhook (nil: one with a 10 s timeout).
	Client *http.Client
	// Registerer, when set, is where boxbroker_budget_alerts_total is
	// registered.
	Registerer prometheus.Registerer
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger receives each alert at WARN (slog.Default when nil).
	Logger *slog.Logger
}

// ParseThresholds reads "80,100" as percentages 1 to 1000.
func ParseThresholds(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(f), "%"))
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 1000 {
			return nil, fmt.Errorf("budget alert threshold %q: want a percentage from 1 to 1000, such as 80", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// AlertEvent is the JSON body a webhook receives.
type AlertEvent struct {
	Type      string  `json:"type"` // "budget_alert"
	Box       string  `json:"box"`
	Principal *string `json:"principal"`
	Window    string  `json:"window"` // month, day, week or Nd
	Period    string  `json:"period"`
	Threshold int     `json:"threshold"`
	LimitUSD  float64 `json:"limit_usd"`
	SpentUSD  float64 `json:"spent_usd"`
	At        string  `json:"at"`
}

// Alerter gives budget alerts. It is safe for concurrent use.
type Alerter struct {
	cfg   AlertConfig
	log   *slog.Logger
	count *prometheus.CounterVec

	mu    sync.Mutex          // guards dirty
	dirty map[string]struct{} // boxes charged since the last look
	hook  *webhook.Sender     // nil: no webhook
}

// NewAlerter returns an Alerter, or an error for a config without a store
// or with a webhook and no key.
func NewAlerter(cfg AlertConfig) (*Alerter, error) {
	if cfg.Store == nil {
		return nil, errors.New("spend: alerts: no store")
	}
	if cfg.Webhook != nil && len(cfg.WebhookKey) == 0 {
		return nil, errors.New("spend: alerts: a webhook needs a key to sign with")
	}
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	a := &Alerter{cfg: cfg, log: cfg.Logger, dirty: map[string]struct{}{},
		count: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "boxbroker_budget_alerts_total",
			Help: "Budget alerts given: a budget's charges crossed a threshold of its limit, by window and threshold."}, []string{"window", "threshold"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.count); err != nil {
			return nil, fmt.Errorf("spend: alerts: %w", err)
		}
	}
	if cfg.Webhook != nil {
		var err error
		if a.hook, err = webhook.New(webhook.Config{URL: cfg.Webhook.String(), Key: cfg.WebhookKey, Name: "budget alert webhook",
			Client: cfg.Client, Attempts: 4, Now: cfg.Now, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Touch marks box as charged: its budgets are looked at in the next
// round.
func (a *Alerter) Touch(box string) {
	a.mu.Lock()
	a.dirty[box] = struct{}{}
	a.mu.Unlock()
}

// Run looks at the budgets of the boxes charged every 10 s until ctx
// ends, then waits for the webhook posts under way.
func (a *Alerter) Run(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	defer func() {
		if a.hook != nil {
			a.hook.Wait()
			_ = a.hook.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		boxes := a.dirty
		a.dirty = map[string]struct{}{}
		a.mu.Unlock()
		for box := range boxes {
			if err := a.Check(ctx, box); err != nil && ctx.Err() == nil {
				a.log.Warn("spend: budget alerts of a box not checked", "box", box, "err", err)
			}
		}
	}
}

// Check gives the alerts of box's budgets whose charges have crossed a
// threshold and were not alerted yet.
func (a *Alerter) Check(ctx context.Context, box string) error {
	now := a.cfg.Now()
	month := Month(now)
	ms, err := Budgets(ctx, a.cfg.Store, box, month)
	if err != nil {
		return err
	}
	for _, b := range ms {
		if err := a.crossed(ctx, store.BudgetAlert{Box: box, Principal: b.Principal, Period: month, Limit: b.Limit, Spent: b.Spent, At: now}); err != nil {
			return err
		}
	}
	ws, err := a.cfg.Store.WindowTallies(ctx, box, now)
	if err != nil {
		return err
	}
	for _, t := range ws {
		if err := a.crossed(ctx, store.BudgetAlert{Box: box, Principal: t.Budget.Principal, Window: t.Budget.Window, Period: t.Bucket,
			Limit: t.Budget.Limit, Spent: t.Spent, At: now}); err != nil {
			return err
		}
	}
	return nil
}

// crossed alerts each threshold al.Spent has reached that no replica
// alerted yet.
func (a *Alerter) crossed(ctx context.Context, al store.BudgetAlert) error {
	if al.Limit <= 0 {
		return nil
	}
	for _, th := range a.cfg.Thresholds {
		if al.Spent*100 < al.Limit*int64(th) {
			continue
		}
		al.Threshold = th
		fresh, err := a.cfg.Store.MarkAlert(ctx, al)
		if err != nil {
			return err
		}
		if fresh {
			a.give(al)
		}
	}
	return nil
}

// give logs, counts and posts al.
func (a *Alerter) give(al store.BudgetAlert) {
	window := al.Window
	if window == "" {
		window = "month"
	}
	a.count.WithLabelValues(window, strconv.Itoa(al.Threshold)).Inc()
	a.log.Warn("spend: budget alert", "box", al.Box, "principal", al.Principal, "window", window, "period", al.Period,
		"threshold_percent", al.Threshold, "limit", FormatUSD(al.Limit), "spent", FormatUSD(al.Spent))
	if a.hook == nil {
		return
	}
	ev := AlertEvent{Type: "budget_alert", Box: al.Box, Window: window, Period: al.Period, Threshold: al.Threshold,
		LimitUSD: Dollars(al.Limit), SpentUSD: Dollars(al.Spent), At: al.At.UTC().Format(time.RFC3339)}
	if al.Principal != "" {
		ev.Principal = &al.Principal
	}
	body, err := json.Marshal(ev)
	if err != nil {
		a.log.Error("spend: budget alert not encoded", "err", err)
		return
	}
	a.hook.Send(body, "box", al.Box, "window", window, "threshold_percent", al.Threshold)
}
