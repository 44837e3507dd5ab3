// Package broker is the box-facing HTTP handler. For every request it
// finds the capability whose prefix owns the path and the route it
// declared whose pattern matches it (a net/http ServeMux built from every
// capability's routes: a 404 for no route, a 405 with Allow for a method
// the route does not list), asks the capability which scope words the
// request needs, authenticates the box's token, applies the
// protocol's rule (package rule) against the box's last declaration
// report, and only then hands the request to the capability. It also
// answers POST /api/box/declaration. The rule is applied here, around
// every capability, never inside one: the HTTPS proxy (package
// egressproxy) admits its tunnels by the same AdmitBox, and answers its
// refusals through Refuse.
package broker

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/outbox"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/telemetry"
)

// Config configures a Server.
type Config struct {
	// Broker is the broker word the server answers for, such as "lobby".
	Broker string
	// Store keeps boxes and reports; Cache reads through it.
	Store store.Store
	Cache *cache.Cache
	// Payer decides who pays for model calls.
	Payer *payer.Resolver
	// Capabilities is the table of capabilities served, in match order.
	Capabilities []capability.Capability
	// Logger receives one line per request; never a token or credential.
	Logger *slog.Logger
	// Metrics counts every request, stream and report (nil: none).
	Metrics *metrics.Metrics
	// Outbox keeps the audit entry of every request it records, with
	// the call's settlement (nil: no audit log).
	Outbox *outbox.Outbox
	// Tracing ends each request's span with what its record says (nil:
	// no tracing).
	Tracing *telemetry.Tracing
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Limits bound each box's request rate and requests in flight.
	Limits Limits
	// ReadTimeout bounds reading a forwarded request's body, from when
	// the broker has chosen its capability to the body's end (0: no
	// bound). The bound is lifted as the body ends, so that it never
	// cuts off the answer's stream.
	ReadTimeout time.Duration
	// TallyEvery is the window over which refusals made before a box was
	// known are kept in aggregate, by source and reason (default
	// DefaultTallyEvery); Run writes each window out.
	TallyEvery time.Duration
	// Recording, when set, is asked before a box's call is served: while
	// it returns an error (the call's audit record could be written
	// neither to the store nor to the spool) the call is refused with a
	// 503 saying so, as Vault refuses requests no audit device can log.
	Recording func() error
	// TrustedProxies are the front proxies whose X-Forwarded-For the
	// broker believes when it judges where a request came from (see
	// SourceOf); none: the peer's address is the source.
	TrustedProxies []netip.Prefix
	// TokenNow is the clock a box token's expiry and a rotation's grace
	// are judged by (default Now).
	TokenNow func() time.Time
}

// Server is the box-facing handler.
type Server struct {
	cfg    Config
	log    *slog.Logger
	limits *limiter
	// routes is every capability's prefixes, in match order, and routes,
	// in a ServeMux, read once when the Server is made.
	routes routes
	// tally keeps refusals made before a box was known, by source and
	// reason, until Run writes them out.
	tally tally
}

// New returns a Server, or an error naming every problem with cfg.
func New(cfg Config) (*Server, error) {
	var problems []string
	if cfg.Broker == "" {
		problems = append(problems, "no broker word")
	}
	if cfg.Store == nil || cfg.Cache == nil {
		problems = append(problems, "no store")
	}
	if cfg.Payer == nil {
		problems = append(problems, "no payer resolver")
	}
	for _, c := range cfg.Capabilities {
		if !protocol.IsCapabilityName(c.Name()) {
			problems = append(problems, fmt.Sprintf("capability name %q is not a capability name", c.Name()))
		}
	}
	routes, more := newRoutes(cfg.Capabilities)
	problems = append(problems, more...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("broker config: %s", strings.Join(problems, "; "))
	}
	defaults.Logger(&cfg.Logger)
	defaults.Clock(&cfg.Now)
	if cfg.TokenNow == nil {
		cfg.TokenNow = cfg.Now
	}
	return &Server{cfg: cfg, log: cfg.Logger, limits: newLimiter(cfg.Limits, cfg.Now), routes: routes}, nil
}
