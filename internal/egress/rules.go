package egress

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// checkRules refuses a request of box the secret sec's rules do not
// allow (403), or one past the box's rate for it (429 with
// Retry-After); tail is the escaped path after the secret's name, which
// joinPath has already accepted. A secret with no rules allows every
// method and path; one with no rate, any number of requests.
//
// The path matched is tail, the path under the secret's base URL's
// path prefix, split at "/" with runs of "/" collapsed (as joinPath
// does), each segment then percent-decoded. A segment that decodes to
// hold a "/" or "\" (an encoded %2F or %5C) is read both ways a host
// may read it: as one segment, and split there; the request is allowed
// only when a rule allows it read either way.
//
// A host may take the request as the method a method-override header
// names (proxy.MethodOverrides, methodsOf), or, for a POST, as the method
// a _method parameter names in its query or body (proxy.MethodParams,
// methodParams): each such method must be allowed too.
//
// A request no rule allows is still allowed when an approval in force
// covers it (see package approval), and, when the owner asks about the
// secret, opens a proposal the refusal names.
func (c *Capability) checkRules(r *http.Request, box, token, tokenHash string, sec store.Secret, tail string) error {
	if len(sec.Rules) > 0 {
		whole, split, err := ruleSegments(tail)
		if err != nil {
			return capability.Refuse(capability.ReasonInvalid, "The path holds an invalid percent-encoding.")
		}
		methods := methodsOf(r)
		if r.Method == http.MethodPost && !(allowed(sec.Rules, anyMethod, whole) && allowed(sec.Rules, anyMethod, split)) {
			named, err := methodParams(r, sec.Name)
			if err != nil {
				return err
			}
			methods = append(methods, named...)
		}
		for _, method := range methods {
			if allowed(sec.Rules, method, whole) && allowed(sec.Rules, method, split) {
				continue
			}
			refusal := c.outsideRules(method, box, sec, split)
			if approved, words := c.ask(r, method, box, token, tokenHash, sec, tail, refusal.Message); !approved {
				refusal.Message += words
				return refusal
			}
		}
	}
	if sec.Rate == "" {
		return nil
	}
	rt, err := protocol.ParseSecretRate(sec.Rate)
	if err != nil {
		return capability.Refuse(capability.ReasonConfig, "The broker's record of %s's rate is not usable; its owner sets it again with `boxbroker secret rules`.", sec.Name).WithErr(fmt.Errorf("secret %s/%s: %w", box, sec.Name, err))
	}
	if wait := c.rates.take(box, sec.Name, rt, c.cfg.Now()); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		e := capability.Refuse(capability.ReasonRate,
			"Egress refused this request: the secret %s allows each box %s, and this box has used them; try again in %d s. Its owner can raise the rate with `%s`.",
			sec.Name, rateWords(rt), secs, rulesCommand(box, sec.Name, sec.Rules, "N/PERIOD"))
		e.Header = http.Header{"Retry-After": {strconv.Itoa(secs)}}
		return e
	}
	return nil
}

// ask reports whether an approval in force allows box's request r, as
// method, outside sec's rules, and otherwise the words its refusal adds when the
// owner asks about sec (the proposal it opened or joined). With no
// approvals configured, or when the store fails (logged; the request
// stays refused), it allows nothing and adds nothing. A proposal never
// holds the box's token.
func (c *Capability) ask(r *http.Request, method, box, token, tokenHash string, sec store.Secret, tail, reason string) (bool, string) {
	if tail == "" {
		tail = "/"
	}
	return c.cfg.Approvals.Ask(r.Context(), approval.Attempt{Attempt: store.Attempt{Box: box, Kind: store.ProposalRule, Secret: sec.Name,
		Method: method, Path: tail, Host: sec.Host, Reason: reason}, TokenHash: tokenHash, Forbidden: []string{token}},
		c.log, "egress: approvals unreadable; the request stays refused", "box", box, "secret", sec.Name)
}

// outsideRules is the refusal of a request no rule of sec allows. It
// quotes the path as the rules read it (decoded), with every token in it
// cut (proxy.ScrubKept): decoded, a token the box sent encoded twice
// (%2562bx_…) is written plainly, and the refusal is kept as a
// proposal's reason.
func (c *Capability) outsideRules(method, box string, sec store.Secret, segs []string) *capability.Error {
	path := proxy.ScrubKept("/" + strings.Join(segs, "/"))
	return capability.Refuse(capability.ReasonRule,
		"Egress refused this request: the secret %s allows only %s; this request was %s %s. Its owner can allow it with `%s`.",
		sec.Name, strings.Join(sec.Rules, " and "), method, path, rulesCommand(box, sec.Name, append(slices.Clone(sec.Rules), method+" "+path), sec.Rate))
}

// methodsOf returns the methods a host may take r as: its own, then each
// non-empty one a method-override header names (under any name a host
// reads as one: proxy.HeaderValues), upper-cased.
func methodsOf(r *http.Request) []string {
	methods := []string{r.Method}
	for _, k := range proxy.MethodOverrides {
		for _, v := range proxy.HeaderValues(r.Header, k) {
			if v = strings.ToUpper(strings.TrimSpace(v)); v != "" {
				methods = append(methods, v)
			}
		}
	}
	return methods
}

// anyMethod is the method only a rule allowing any method ("*") allows:
// a path where one does need no _method read.
const anyMethod = "*"

// methodParams returns the methods a host may take r, a POST of the
// secret name, as from a proxy.MethodParam in its query or its body
// (proxy.MethodParams), upper-cased, the empty ones left out. Every host
// that reads one (Rails, Laravel and Symfony, Spring, Express's
// method-override, Phoenix, ASP.NET Core) reads it in a POST alone. A
// body of a type a host may read one from (proxy.MethodParamBody) is
// read whole, up to maxReadBody, and put back; a larger one, which could
// name any method unread, is a refusal, and so is a multipart body that
// does not read, or a body whose Content-Type does not parse or is
// given more than once (proxy.ContentType). A body of any other type (a
// file, of any size) is streamed unread.
func methodParams(r *http.Request, name string) ([]string, error) {
	unread := func(err error) error {
		return capability.Refuse(capability.ReasonInvalid,
			"The request's Content-Type does not parse, or its body is not a multipart form the broker can read, so the broker cannot judge the method a _method in it may name against the rules of the secret %s.", name).WithErr(err)
	}
	ct, err := proxy.ContentType(r.Header)
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	if err != nil && hasBody {
		return nil, unread(err)
	}
	var body []byte
	if hasBody && proxy.MethodParamBody(ct) {
		tooLarge := capability.Refuse(capability.ReasonTooLarge,
			"The broker reads a POST's body of a form, multipart or JSON type (a Content-Type naming /json or +json anywhere), or of no type, of up to %d bytes whole to judge the method a _method in it names against the rules of the secret %s, which allow only some methods here; this one is larger, and was not sent. A file sent as a body of its own type (application/octet-stream, image/png) is streamed unread, and a rule allowing any method at the path (`--allow '* PATTERN'`) lets such a body through unread.", maxReadBody, name)
		if r.ContentLength > maxReadBody {
			return nil, tooLarge
		}
		b, err := readUpTo(r, maxReadBody+1)
		if err != nil {
			return nil, capability.UnreadableBody(err)
		}
		if len(b) > maxReadBody {
			r.Body = proxy.PutBack(b, r.Body)
			return nil, tooLarge
		}
		r.Body.Close()
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		if len(b) == 0 {
			r.Body = http.NoBody
		}
		body = b
	}
	vals, err := proxy.MethodParams(r.URL.RawQuery, ct, body)
	if err != nil {
		return nil, unread(err)
	}
	var methods []string
	for _, v := range vals {
		if v = strings.ToUpper(strings.TrimSpace(v)); v != "" {
			methods = append(methods, v)
		}
	}
	return methods, nil
}

// rulesCommand is the command that sets box's secret name's rules to
// rules and its rate to rate. It names them whole, since `secret rules`
// replaces both, and sends no value. Each rule is single-quoted for a
// POSIX shell, each quote in it written as one that ends the quoting, a
// backslash-escaped one, and one that begins it again: a rule may hold
// what the box chose (the path, decoded, a method an override names),
// and the owner may run the command as the refusal or a proposal's
// reason shows it.
func rulesCommand(box, name string, rules []string, rate string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "boxbroker secret rules %s %s", box, name)
	for _, r := range rules {
		fmt.Fprintf(&b, " --allow '%s'", strings.ReplaceAll(r, "'", `'\''`))
	}
	if rate != "" {
		fmt.Fprintf(&b, " --rate %s", rate)
	}
	return b.String()
}

// allowed reports whether one of rules allows method at segs.
func allowed(rules []string, method string, segs []string) bool {
	for _, s := range rules {
		rule, err := protocol.ParseSecretRule(s)
		if err == nil && rule.Match(method, segs) {
			return true
		}
	}
	return false
}

// ruleSegments returns tail's segments as rules match them: whole, each
// segment percent-decoded as one; and split, with each segment decoded
// again up to three times (as a host that decodes twice reads %252F)
// and split at "/" or "\" (empty parts dropped). Runs of "/" are collapsed, as joinPath does.
// An empty tail (the base URL itself) is the one empty segment, as "/" is.
func ruleSegments(tail string) (whole, split []string, err error) {
	if tail == "" {
		tail = "/"
	}
	segs := strings.Split(tail[1:], "/")
	for i, seg := range segs {
		if seg == "" && i != len(segs)-1 {
			continue
		}
		d, err := url.PathUnescape(seg)
		if err != nil {
			return nil, nil, err
		}
		whole = append(whole, d)
		// As a host that decodes again reads it (%252F), as checkSegment
		// decodes for dot segments.
		s := d
		for range 3 {
			dd, err := url.PathUnescape(s)
			if err != nil || dd == s {
				break
			}
			s = dd
		}
		split = append(split, strings.FieldsFunc(s, func(r rune) bool { return r == '/' || r == '\\' })...)
	}
	return whole, split, nil
}

// rateWords writes a rate for a person: "120 requests a minute".
func rateWords(rt protocol.SecretRate) string {
	per := map[time.Duration]string{time.Second: "a second", time.Minute: "a minute", time.Hour: "an hour"}[rt.Per]
	return strconv.Itoa(rt.N) + " requests " + per
}

// maxBuckets bounds the token buckets a Capability keeps; past it, all
// are dropped and start full again.
const maxBuckets = 1 << 16

// rates are the token buckets of the secrets with a rate: one for each
// box and secret, in this process's memory (each replica keeps its own).
type rates struct {
	mu sync.Mutex
	m  map[string]*bucket // by box + "\x00" + secret name
}

// bucket is one box's token bucket for one secret, at the rate rt.
type bucket struct {
	rt  protocol.SecretRate
	lim *rate.Limiter
}

// take spends one request of box's bucket for the secret name at rt and
// returns 0, or, when it is empty, how long until it holds one again
// (nothing spent). A changed rate starts a full bucket.
func (rs *rates) take(box, name string, rt protocol.SecretRate, now time.Time) time.Duration {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	key := box + "\x00" + name
	b := rs.m[key]
	if b == nil || b.rt != rt {
		if rs.m == nil || len(rs.m) >= maxBuckets {
			rs.m = map[string]*bucket{}
		}
		b = &bucket{rt: rt, lim: rate.NewLimiter(rate.Limit(float64(rt.N)/rt.Per.Seconds()), rt.N)}
		rs.m[key] = b
	}
	res := b.lim.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d
	}
	return 0
}
