package pool

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// The routes whose calls count against limits of their own upstream: a
// box that floods one does not cool an entry for the others.
const (
	RouteMessages    = "messages"
	RouteCountTokens = "count_tokens"
	RouteModels      = "models"
)

// Overloaded is what Stat.Cooling names for an entry that answered 529
// or an overloaded_error, which cools every route of the call's model:
// "overloaded/MODEL", or Overloaded alone for a call whose model the
// pool was not told (capability.Failover's Model).
const Overloaded = "overloaded"

// maxOverloads bounds the models one entry keeps overloads of apart, and
// maxModel the length of a model's name kept: past either (the box
// chooses the model), an overload is kept as one of an unknown model,
// which holds every call.
const (
	maxOverloads = 64
	maxModel     = 128
)

// overloadKey is the name of an entry's overload of model.
func overloadKey(model string) string {
	if model == "" {
		return Overloaded
	}
	return Overloaded + "/" + model
}

// overloadModelLocked is the model an overload of model on the entry
// whose health is h is kept as: model, or "" (unknown) when its name is
// too long or the entry keeps maxOverloads overloads of other models
// still cooling. Overloads that cool for no one any more are dropped.
func overloadModelLocked(h *health, model string, now time.Time) string {
	if len(model) > maxModel {
		return ""
	}
	if model == "" || h.limits[overloadKey(model)] != nil {
		return model
	}
	n := 0
	for k, l := range h.limits {
		if !l.over {
			continue
		}
		if l.idle(now) {
			delete(h.limits, k)
			continue
		}
		n++
	}
	if n >= maxOverloads {
		return ""
	}
	return model
}

// idle reports whether l cools for no box at now.
func (l *limit) idle(now time.Time) bool {
	if now.Before(l.until) {
		return false
	}
	for _, bc := range l.boxes {
		if now.Before(bc.until) {
			return false
		}
	}
	return true
}

// maxCooledBoxes bounds the boxes one limit keeps a cooling of their own
// for; a limit that more boxes drew a 429 on cools for every box.
const maxCooledBoxes = 1024

type routeKey struct{}

// ForRoute returns ctx naming route (RouteMessages, RouteCountTokens or
// RouteModels) as the limit a call Choose is asked for counts against.
func ForRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// RouteOf is the route ctx names (ForRoute), RouteMessages when none.
func RouteOf(ctx context.Context) string {
	if r, ok := ctx.Value(routeKey{}).(string); ok && r != "" {
		return r
	}
	return RouteMessages
}

// The kinds of limit an answer's anthropic-ratelimit-* headers name, in
// the order they are looked for.
var kinds = [...]string{"requests", "input-tokens", "output-tokens", "tokens"}

// limitKind is the kind of the limit a 429 answer's headers say is spent
// (its anthropic-ratelimit-KIND-remaining is 0), and its reset; "" when
// they name none.
func limitKind(hd http.Header) (kind string, reset time.Time) {
	for _, k := range kinds {
		if hd.Get("Anthropic-Ratelimit-"+k+"-Remaining") == "0" {
			t, _ := time.Parse(time.RFC3339, hd.Get("Anthropic-Ratelimit-"+k+"-Reset"))
			return k, t
		}
	}
	return "", time.Time{}
}

// Limit names the limit of kind (as limitKind gives it) on route, as
// Stat.Cooling shows it: "messages/input-tokens", or "count_tokens" when
// the answer named no kind.
func Limit(route, kind string) string {
	if kind == "" {
		return route
	}
	return route + "/" + kind
}

// limit is one of an entry's rate limits, or its overload of a model,
// as this replica knows it.
type limit struct {
	route string // a rate limit's route
	// over is true for an overload, of model ("" for calls whose model
	// was not known), which cools every route.
	over  bool
	model string
	until time.Time // cooling for every box until
	boxes map[string]*boxCool
}

// applies reports whether l holds calls on route of model ("" when not
// known): a rate limit of route, or an overload of model; a call of a
// model not known is held by every overload, and an overload of calls
// whose model was not known holds every call.
func (l *limit) applies(route, model string) bool {
	if !l.over {
		return l.route == route
	}
	return model == "" || l.model == "" || l.model == model
}

// boxCool is one box's own cooling of a limit.
type boxCool struct {
	until   time.Time
	strikes int // the box's 429s on the limit in a row, for the backoff
}

// cools reports whether l cools for box at now.
func (l *limit) cools(box string, now time.Time) bool {
	if now.Before(l.until) {
		return true
	}
	bc := l.boxes[box]
	return bc != nil && now.Before(bc.until)
}

// coolLocked cools the limit key of entry name (whose health is h) that
// box's call drew a 429 or an overload on, with header hd (like is the
// limit as made when new: its route, or its overload's model): for box,
// for the answer's retry-after, else the limit's reset, else a backoff of
// box's own refusals on it; and for every box while CoolBoxes boxes' own
// coolings of it last, so that no one box's coolings, however many or
// long, cool it for the others.
func (p *Pool) coolLocked(h *health, name, box, key string, like limit, hd http.Header, reset time.Time, now time.Time) {
	if h.limits == nil {
		h.limits = map[string]*limit{}
	}
	l := h.limits[key]
	if l == nil {
		like.boxes = map[string]*boxCool{}
		l = &like
		h.limits[key] = l
	}
	for b, bc := range l.boxes {
		if !now.Before(bc.until) {
			delete(l.boxes, b)
		}
	}
	bc := l.boxes[box]
	if bc == nil {
		bc = &boxCool{}
	}
	bc.strikes++
	d, ok := protocol.RetryAfter(hd, now)
	if !ok && !reset.IsZero() {
		d, ok = max(reset.Sub(now), 0), true
	}
	if !ok {
		d = CoolBase << min(bc.strikes-1, 20)
	}
	until := now.Add(min(d, CoolMax))
	bc.until = later(bc.until, until)
	all := l.until
	if _, kept := l.boxes[box]; kept || len(l.boxes) < maxCooledBoxes {
		l.boxes[box] = bc
		// The CoolBoxes'th latest of the boxes' coolings.
		us := make([]time.Time, 0, len(l.boxes))
		for _, c := range l.boxes {
			us = append(us, c.until)
		}
		if len(us) >= CoolBoxes {
			sort.Slice(us, func(i, j int) bool { return us[i].After(us[j]) })
			all = later(all, us[CoolBoxes-1])
		}
	} else {
		// Past the bound, so many boxes drew one that it cools for all.
		all = later(all, until)
	}
	if all.After(l.until) {
		if !now.Before(l.until) {
			p.cfg.Logger.Info("credential pool: an entry's limit cools for every box", "entry", name, "limit", key,
				"until", all.UTC().Format(time.RFC3339))
		}
		l.until = all
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
