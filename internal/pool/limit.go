package pool

import (
	"context"
	"net/http"
	"sort"
	"time"
)

// The routes whose calls count against limits of their own upstream: a
// box that floods one does not cool an entry for the others.
const (
	RouteMessages    = "messages"
	RouteCountTokens = "count_tokens"
	RouteModels      = "models"
)

// Overloaded is what Stat.Cooling names for an entry that answered 529
// or an overloaded_error, which cools every route.
const Overloaded = "overloaded"

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

// limit is one of an entry's rate limits, as this replica knows it.
type limit struct {
	route string
	until time.Time // cooling for every box until
	boxes map[string]*boxCool
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

// coolLocked cools the limit of entry name (whose health is h) that box's
// call on route drew a 429 on, with header hd: for box, for the answer's
// retry-after, else the limit's reset, else a backoff of box's own 429s
// on it; and for every box while CoolBoxes boxes' own coolings of it
// last, so that no one box's coolings, however many or long, cool it for
// the others.
func (p *Pool) coolLocked(h *health, name, box, route string, hd http.Header, now time.Time) {
	kind, reset := limitKind(hd)
	key := Limit(route, kind)
	if h.limits == nil {
		h.limits = map[string]*limit{}
	}
	l := h.limits[key]
	if l == nil {
		l = &limit{route: route, boxes: map[string]*boxCool{}}
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
	d, ok := retryAfter(hd, now)
	if !ok && !reset.IsZero() {
		d, ok = max(reset.Sub(now), 0), true
	}
	if !ok {
		d = p.cfg.CoolBase << min(bc.strikes-1, 20)
	}
	until := now.Add(min(d, p.cfg.CoolMax))
	bc.until = later(bc.until, until)
	all := l.until
	if _, kept := l.boxes[box]; kept || len(l.boxes) < maxCooledBoxes {
		l.boxes[box] = bc
		// The CoolBoxes'th latest of the boxes' coolings.
		us := make([]time.Time, 0, len(l.boxes))
		for _, c := range l.boxes {
			us = append(us, c.until)
		}
		if len(us) >= p.cfg.CoolBoxes {
			sort.Slice(us, func(i, j int) bool { return us[i].After(us[j]) })
			all = later(all, us[p.cfg.CoolBoxes-1])
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
