// Package server assembles a running boxbroker from its Config: it opens
// the store and the master key, builds the capability table and the
// box-facing handler, keeps the cache fresh, and serves until its context
// ends, then shuts down gracefully, letting in-flight streams finish for a
// bounded time.
package server

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/egress"
	"github.com/intentius/boxbroker/internal/feedback"
	"github.com/intentius/boxbroker/internal/inference"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/store/deadline"
)

// Config is boxbroker's whole configuration. The zero value of each field
// takes the default DefaultConfig holds (see Defaults); flags and BOXBROKER_*
// environment variables override them in cmd/boxbroker.
type Config struct {
	// Listen is the box-facing address (default 127.0.0.1:8787).
	Listen string
	// AdminListen is the admin API's address (default 127.0.0.1:8788);
	// "off" serves no admin API. It is never the box-facing address.
	AdminListen string
	// AdminHosts are the host names an operator reaches the admin
	// listener by, besides localhost, any IP address and AdminListen's
	// own host: a request whose Host (with any port, or none) names any
	// other is refused, so that a page whose name is rebound to the
	// broker's address reads nothing of it. Nil adds none.
	AdminHosts []string
	// Broker is the broker word this broker answers for (default "lobby").
	Broker string
	// DataDir holds the SQLite file and the master key file (default
	// $XDG_DATA_HOME/boxbroker or ~/.local/share/boxbroker).
	DataDir string
	// Store is "" for SQLite in DataDir, or a postgres:// URL.
	Store string
	// AnthropicURL is the Anthropic API upstream (default https://api.anthropic.com).
	AnthropicURL *url.URL
	// FountainURL is the Fountain API upstream; nil serves no /fountain.
	FountainURL *url.URL
	// Feedback is what the broker does with feedback batches: "keep"
	// (the default) stores them, "off" answers 501 so each box keeps its
	// batches to send later.
	Feedback string
	// FeedbackMaxBatches and FeedbackMaxBytes bound what one box keeps of
	// feedback (defaults feedback.DefaultMaxBatches and
	// feedback.DefaultMaxBytes): a batch past either drops the box's
	// oldest, counted in boxbroker_feedback_dropped_total and logged.
	FeedbackMaxBatches int
	FeedbackMaxBytes   int64
	// MasterKey, when set, is the master key (hex or base64 of 32 bytes);
	// otherwise the key file in DataDir is used or created.
	MasterKey string
	// ShutdownGrace bounds how long in-flight requests and streams may
	// finish after SIGINT/SIGTERM (default 30 s).
	ShutdownGrace time.Duration
	// UpstreamHeaderTimeout bounds the wait for an upstream's answer
	// headers (default 10 min).
	UpstreamHeaderTimeout time.Duration
	// DecideTimeout bounds answering one POST /decide/v1/systemone, every
	// question included (default 30 s); past it the answer is a 504.
	DecideTimeout time.Duration
	// MaxBody bounds a forwarded request body (default 64 MiB).
	MaxBody int64
	// EgressMaxBody bounds a request body sent to an egress secret's host
	// (default 256 MiB). Bodies are streamed, never held.
	EgressMaxBody int64
	// ProposalWait is how long a proposal (package approval) waits for
	// a person's answer before it expires (default 24 h).
	ProposalWait time.Duration
	// ProposalMax bounds each box's pending proposals (default 5).
	ProposalMax int
	// PageURL is the owner's page as a person reaches it, named in the
	// refusals that open a proposal; "" names only the CLI.
	PageURL string
	// ProposalWebhook, when set, is the URL each new proposal is POSTed
	// to, in ProposalWebhookShape ("json", the default, or "slack"),
	// signed with ProposalWebhookKey (see docs/approvals.md).
	ProposalWebhook      string
	ProposalWebhookShape string
	ProposalWebhookKey   string
	// PoolRetryBody bounds a Messages or count_tokens body kept in memory
	// so that a call the operator's pool pays for can be made again on
	// another entry after a refusal (default 4 MiB; -1: never retried).
	PoolRetryBody int64
	// ReadHeaderTimeout bounds reading a request's headers (default 10 s);
	// on HTTP/2, an unfinished header block's connection is closed within
	// twice it, and a connection silent for it is sent a PING.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a request: its header and, on the
	// box-facing listener, its body, which must end within ReadTimeout of
	// the broker's choosing a capability for it (default 10 min). An
	// answer's stream is never cut off by it.
	ReadTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (default 64 KiB).
	MaxHeaderBytes int
	// LogLevel is debug, info, warn or error (default info).
	LogLevel string
	// BoxRate is the requests per second one box may make (0: no bound),
	// BoxBurst how many above that it may make at once, and
	// BoxConcurrent how many it may have in flight, streams included
	// (default 256; negative for no bound).
	BoxRate       float64
	BoxBurst      int
	BoxConcurrent int
	// BudgetAlerts are the percentages of a budget's limit whose
	// crossing alerts (spend.Alerter); none gives no alerts.
	BudgetAlerts []int
	// BudgetWebhook, when set, receives each budget alert, signed with
	// BudgetWebhookKey (required with it).
	BudgetWebhook    *url.URL
	BudgetWebhookKey []byte
	// Prices is a JSON price file read over the default price table
	// (see spend.LoadPrices); "" for the defaults alone.
	Prices string
	// UnpricedAs is the model of the price table whose price a call of a
	// model neither in the table nor of a family in it is charged at
	// (see spend.Prices.WithUnpricedAs); "" for the dearest in the table.
	UnpricedAs string
	// ReserveMaxTokens bounds, for a budget's reservation, the output of a
	// Messages call whose max_tokens the broker did not read because its
	// body is over 1 MiB (default 64000).
	ReserveMaxTokens int64
	// TLSCert and TLSKey, when both set, are PEM files the box-facing
	// listener serves TLS with (TLS 1.2 and above), for operators without
	// a terminating proxy in front.
	TLSCert, TLSKey string
	// SSO is single sign-on for the owner's page (package sso); its zero
	// value is off, and the admin token signs in either way.
	SSO sso.Config
	// AuditRetention is how long audit log entries are kept (default 30
	// days); older ones are pruned hourly.
	AuditRetention time.Duration
	// AuditSinkURL, when set, is where the audit rows are streamed as
	// JSON lines (package auditsink); nil streams none.
	AuditSinkURL *url.URL
	// AuditSinkToken, when set, is the audit sink's bearer token.
	AuditSinkToken string
	// AuditSinkBacklog is the most audit rows kept for the sink while it
	// does not take them (default auditsink.DefaultMaxBacklog; 0 the
	// same); past it the oldest are dropped.
	AuditSinkBacklog int
	// StoreDeadline bounds each store call a request makes (default
	// 250 ms): past it the request is answered 503 with Retry-After.
	StoreDeadline time.Duration
	// ReservationLease is how long a budget's reservation is held
	// without its call's replica renewing it (default 2 min; see
	// spend.DefaultStaleAfter).
	ReservationLease time.Duration
	// AuditOptional serves calls whose audit record can be written
	// neither to the store nor to the spool; by default (false) they are
	// refused with a 503 (see docs/reliability.md).
	AuditOptional bool
	// TrustedProxies are the front proxies (a load balancer, a sandbox
	// host's gateway) whose X-Forwarded-For the broker believes when it
	// judges where a box's request came from, for a token bound to its
	// box's addresses (box add --from, box bind); see broker.SourceOf.
	// Nil believes no X-Forwarded-For: the peer's address is the source.
	TrustedProxies []netip.Prefix
	// NewStore lets serve make a new, empty SQLite database in a data
	// directory that holds a master key file, a journal or a spool but
	// no database (one whose database was deleted or moved); by default
	// (false) serve refuses to start there.
	NewStore bool
}

// Values of Config.Feedback.
const (
	FeedbackKeep = "keep"
	FeedbackOff  = "off"
)

// DefaultDataDir is where data lives when neither --data nor
// BOXBROKER_DATA says.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "boxbroker")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "boxbroker")
	}
	return "boxbroker-data"
}

// DefaultConfig returns boxbroker's defaults: the one place each is
// written. Defaults fills a Config's zero fields from it, and serve's
// flags take their defaults from it. A field it leaves zero has no
// default (zero means none, or is decided elsewhere, as Store's SQLite).
func DefaultConfig() Config {
	anthropic, _ := url.Parse("https://api.anthropic.com")
	return Config{
		Listen:                "127.0.0.1:8787",
		AdminListen:           DefaultAdminListen,
		Broker:                "lobby",
		DataDir:               DefaultDataDir(),
		AnthropicURL:          anthropic,
		Feedback:              FeedbackKeep,
		FeedbackMaxBatches:    feedback.DefaultMaxBatches,
		FeedbackMaxBytes:      feedback.DefaultMaxBytes,
		ShutdownGrace:         30 * time.Second,
		UpstreamHeaderTimeout: 10 * time.Minute,
		DecideTimeout:         30 * time.Second,
		MaxBody:               protocol.DefaultMaxBody,
		EgressMaxBody:         egress.DefaultMaxBody,
		ProposalWait:          approval.DefaultPendingFor,
		ProposalMax:           approval.DefaultMaxPending,
		ProposalWebhookShape:  "json",
		PoolRetryBody:         inference.DefaultMaxRetried,
		ReadHeaderTimeout:     10 * time.Second,
		ReadTimeout:           10 * time.Minute,
		MaxHeaderBytes:        64 << 10,
		LogLevel:              "info",
		BoxConcurrent:         256,
		ReserveMaxTokens:      spend.DefaultMaxTokens,
		AuditRetention:        30 * 24 * time.Hour,
		AuditSinkBacklog:      auditsink.DefaultMaxBacklog,
		StoreDeadline:         deadline.Default,
		ReservationLease:      spend.DefaultStaleAfter,
	}
}

// Defaults fills every zero field of c with DefaultConfig's value.
func (c *Config) Defaults() {
	def := reflect.ValueOf(DefaultConfig())
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.CanSet() && f.IsZero() {
			f.Set(def.Field(i))
		}
	}
}

// DefaultAdminListen is the admin API's default address.
const DefaultAdminListen = "127.0.0.1:8788"

// AdminEnabled reports whether the admin API is served: AdminListen is
// neither empty nor "off".
func (c *Config) AdminEnabled() bool { return c.AdminListen != "" && c.AdminListen != "off" }

// adminHosts are the host names the admin listener answers for besides
// localhost and IP addresses: AdminHosts, and AdminListen's host when it
// is a name.
func (c *Config) adminHosts() []string {
	hosts := append([]string(nil), c.AdminHosts...)
	if h, _, err := net.SplitHostPort(c.AdminListen); err == nil && net.ParseIP(h) == nil {
		if _, ok := admin.HostName(h); ok {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// sameAddress reports whether two host:port addresses would collide: the
// same port (other than 0, which picks a free one) on the same host, or on
// any host when either is unspecified.
func sameAddress(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	unspecified := func(h string) bool {
		if h == "" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsUnspecified()
	}
	return ha == hb || unspecified(ha) || unspecified(hb)
}

// shown is a setting's value as Validate's refusal quotes it: quoted
// when it reads as a mistyped value, its length alone when it does not
// (quiet.Shown), as a key put in the wrong variable does not.
func shown(v string) string { return quiet.Shown(v, 256) }

// Validate reports every problem with c at once.
func (c *Config) Validate() error {
	var p []string
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		p = append(p, fmt.Sprintf("listen (BOXBROKER_LISTEN) %s is not host:port", shown(c.Listen)))
	}
	if c.AdminEnabled() {
		if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
			p = append(p, fmt.Sprintf("admin-listen (BOXBROKER_ADMIN_LISTEN) %s is not host:port (or off)", shown(c.AdminListen)))
		} else if sameAddress(c.Listen, c.AdminListen) {
			p = append(p, fmt.Sprintf("admin-listen (BOXBROKER_ADMIN_LISTEN) %q is the box-facing address; the admin API needs its own", c.AdminListen))
		}
	}
	for _, h := range c.AdminHosts {
		if _, ok := admin.HostName(h); !ok {
			p = append(p, fmt.Sprintf("admin-hosts (BOXBROKER_ADMIN_HOSTS) entry %s is not a host name (such as broker.example.com, with no port)", shown(h)))
		}
	}
	if c.Broker == "" || strings.ContainsAny(c.Broker, " \t\r\n") {
		p = append(p, fmt.Sprintf("broker word (--broker, BOXBROKER_BROKER) %s must be one non-empty word", shown(c.Broker)))
	}
	if c.Store != "" && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		p = append(p, "store (BOXBROKER_STORE) must be empty (SQLite in the data directory) or a postgres:// URL")
	}
	for _, u := range []struct {
		name string
		u    *url.URL
	}{{"anthropic-url (BOXBROKER_ANTHROPIC_URL)", c.AnthropicURL}, {"fountain-url (BOXBROKER_FOUNTAIN_URL)", c.FountainURL}} {
		if u.u == nil {
			continue
		}
		if (u.u.Scheme != "https" && u.u.Scheme != "http") || u.u.Host == "" || u.u.User != nil || u.u.RawQuery != "" || u.u.Fragment != "" {
			p = append(p, fmt.Sprintf("%s %q must be an http(s) URL with a host and no credentials, query or fragment", u.name, protocol.ShownURL(u.u)))
		}
	}
	if c.AuditRetention < 0 {
		p = append(p, "audit-retention must not be negative")
	}
	if u := c.AuditSinkURL; u != nil && ((u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "") {
		p = append(p, fmt.Sprintf("audit-sink-url (BOXBROKER_AUDIT_SINK_URL) %q must be an http(s) URL with a host and no credentials or fragment (give a token in BOXBROKER_AUDIT_SINK_TOKEN)", protocol.ShownURL(u)))
	}
	if u := c.AuditSinkURL; u != nil && c.AuditSinkToken != "" && quiet.InClear(u) {
		p = append(p, fmt.Sprintf("audit-sink-url (BOXBROKER_AUDIT_SINK_URL) %q is plain http to another machine, and BOXBROKER_AUDIT_SINK_TOKEN would cross the network in the clear: use https (http only on a loopback host)", protocol.ShownURL(u)))
	}
	if c.AuditSinkBacklog < 0 {
		p = append(p, "audit-sink-backlog must not be negative")
	}
	if c.ShutdownGrace < 0 || c.UpstreamHeaderTimeout < 0 || c.ReadHeaderTimeout < 0 || c.ReadTimeout < 0 || c.DecideTimeout < 0 || c.StoreDeadline < 0 || c.ReservationLease < 0 {
		p = append(p, "durations must not be negative")
	}
	if c.BoxRate < 0 || c.BoxBurst < 0 {
		p = append(p, "box rate and burst must not be negative")
	}
	if c.ProposalWait < 0 || c.ProposalMax < 0 {
		p = append(p, "proposal-wait and proposal-max must not be negative")
	}
	if c.ProposalWebhookShape != "" && c.ProposalWebhookShape != "json" && c.ProposalWebhookShape != "slack" {
		p = append(p, fmt.Sprintf("proposal-webhook-shape %s is not json or slack", shown(c.ProposalWebhookShape)))
	}
	if c.ProposalWebhook != "" {
		if u, err := url.Parse(c.ProposalWebhook); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			p = append(p, "proposal-webhook (BOXBROKER_PROPOSAL_WEBHOOK) is not an http or https URL")
		}
		if c.ProposalWebhookKey == "" {
			p = append(p, "proposal-webhook needs BOXBROKER_PROPOSAL_WEBHOOK_KEY, the key its requests are signed with")
		}
	}
	// A webhook's URL is often its credential (a Slack or Teams incoming
	// webhook's path), so neither it nor the body goes over plain http to
	// another machine, and the refusal names the host only.
	proposalHook, _ := url.Parse(c.ProposalWebhook)
	for _, w := range []struct {
		name string
		u    *url.URL
	}{{"budget-webhook (BOXBROKER_BUDGET_WEBHOOK)", c.BudgetWebhook}, {"proposal-webhook (BOXBROKER_PROPOSAL_WEBHOOK)", proposalHook}} {
		if w.u != nil && w.u.Host != "" && quiet.InClear(w.u) {
			p = append(p, fmt.Sprintf("%s is plain http to %s, another machine: its URL (which may be the webhook's credential) and what it posts would cross the network in the clear: use https (http only on a loopback host)", w.name, w.u.Host))
		}
	}
	if c.ReserveMaxTokens < 0 {
		p = append(p, "reserve-max-tokens must not be negative")
	}
	if c.MaxBody < 0 || c.EgressMaxBody < 0 || c.MaxHeaderBytes < 0 {
		p = append(p, "size bounds must not be negative")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		p = append(p, "tls-cert and tls-key (BOXBROKER_TLS_CERT, BOXBROKER_TLS_KEY) go together: give both or neither")
	}
	if c.Feedback != FeedbackKeep && c.Feedback != FeedbackOff {
		p = append(p, fmt.Sprintf("feedback %s is not keep or off", shown(c.Feedback)))
	}
	if c.FeedbackMaxBatches < 0 || c.FeedbackMaxBytes < 0 {
		p = append(p, "feedback-max-batches and feedback-max-bytes must not be negative")
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		p = append(p, fmt.Sprintf("log level %s is not debug, info, warn or error", shown(c.LogLevel)))
	}
	if err := c.SSO.Validate(); err != nil {
		p = append(p, err.Error())
	} else if c.SSO.Enabled() && !c.AdminEnabled() {
		p = append(p, "single sign-on is for the owner's page, which admin-listen (BOXBROKER_ADMIN_LISTEN) off does not serve")
	} else if c.SSO.Enabled() {
		// The provider sends the browser back to the redirect URL, whose
		// host the admin listener must answer for.
		u, _ := url.Parse(c.SSO.RedirectURL)
		h := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if _, err := netip.ParseAddr(h); err != nil && h != "localhost" && !slices.ContainsFunc(c.adminHosts(), func(a string) bool { return strings.EqualFold(strings.TrimSuffix(a, "."), h) }) {
			p = append(p, fmt.Sprintf("sso-redirect-url (BOXBROKER_SSO_REDIRECT_URL) names host %s, which the admin listener does not answer for: add it to admin-hosts (BOXBROKER_ADMIN_HOSTS)", h))
		}
	}
	if len(p) > 0 {
		return fmt.Errorf("configuration: %s", strings.Join(p, "; "))
	}
	return nil
}
