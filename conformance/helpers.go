package conformance

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/protocol"
)

// entry is one capability of a report conformance-a posts.
type entry struct {
	name  string
	scope []string
}

// reportBody is a report of entries, each brokered by the suite's broker.
func (c *checkRun) reportBody(entries ...entry) []byte {
	caps := []protocol.Capability{}
	for _, e := range entries {
		caps = append(caps, protocol.Capability{Name: e.name, Broker: c.s.env.Broker, Scope: append([]string{}, e.scope...)})
	}
	return mustJSON(map[string]any{"capabilities": caps})
}

// report posts entries as conformance-a's declaration, and returns the
// answer when it is a 200; anything else is a problem. It then marks the
// upstream log, so that what the check does next is judged alone.
func (c *checkRun) report(entries ...entry) *reply {
	return c.reportRaw(c.reportBody(entries...))
}

// reportRaw posts body as conformance-a's declaration; see report.
func (c *checkRun) reportRaw(body []byte) *reply {
	defer c.step()
	r := c.do(Probe{Method: http.MethodPost, Path: "/api/box/declaration", Header: jsonHeader(bearer(c.s.tokenA)), Body: body})
	if r == nil {
		return nil
	}
	if r.Status != http.StatusOK {
		c.fail("reporting conformance-a's declaration: %s is %d, want 200 (%s)", r.what, r.Status, brief(r.Body))
		return nil
	}
	return r
}

// step marks the upstream log: since returns what arrived after it.
func (c *checkRun) step() { c.mark = c.s.stands.log.len() }

// since returns what the stand-ins received since the last step.
func (c *checkRun) since() []exchange { return c.s.stands.log.since(c.mark) }

// nothingUpstream fails for each request a stand-in received since the
// last step: a refusal must reach no upstream.
func (c *checkRun) nothingUpstream() {
	for _, e := range c.since() {
		c.fail("the %s stand-in received %s %s, but a refused or unserved request must reach no upstream", e.Upstream, e.Method, e.Path)
	}
}

// onlyTo fails for each request since the last step that reached a
// stand-in other than upstream, and returns those that reached upstream.
func (c *checkRun) onlyTo(upstream string) []exchange {
	var out []exchange
	for _, e := range c.since() {
		if e.Upstream != upstream {
			c.fail("the %s stand-in received %s %s; only the %s stand-in should have", e.Upstream, e.Method, e.Path, upstream)
			continue
		}
		out = append(out, e)
	}
	return out
}

// tokenFree fails if e carries a box's token anywhere.
func (c *checkRun) tokenFree(e exchange) {
	d := e.dump()
	for box, token := range map[string]string{BoxReporting: c.s.tokenA, BoxSilent: c.s.tokenB} {
		if strings.Contains(d, token) {
			c.fail("the %s stand-in received %s's token in %s %s", e.Upstream, box, e.Method, e.Path)
		}
	}
}

// status fails unless r's status is one of want, and reports whether it is.
func (c *checkRun) status(r *reply, want ...int) bool {
	if r == nil {
		return false
	}
	if slices.Contains(want, r.Status) {
		return true
	}
	c.fail("%s is %d, want %s (%s)", r.what, r.Status, statuses(want), brief(r.Body))
	return false
}

// refused fails unless r is a refusal: one of the statuses, a body that
// validates against $defs/refusal, and a message naming each of words.
func (c *checkRun) refused(r *reply, want []int, words ...string) {
	if !c.status(r, want...) {
		return
	}
	if p := c.s.validator.validate("refusal", r.Body); p != "" {
		c.fail("%s: the refusal %s (%s)", r.what, p, brief(r.Body))
		return
	}
	msg := message(r.Body)
	for _, w := range words {
		if !namesWord(msg, w) {
			c.fail("%s: the refusal's message does not name %q: %q", r.what, w, msg)
		}
	}
}

// message is a refusal body's message, whether its error is an object
// or a message alone; "" when there is none.
func message(body []byte) string {
	_, msg := protocol.ReadRefusal(body)
	return msg
}

// isDeclarationRefusal reports whether msg is a refusal by the
// declaration, as protocol.DeclaredRefusal words one, rather than by a
// broker's own policy.
func isDeclarationRefusal(msg string) bool {
	for _, s := range []string{"does not list", "declares no", "has no declaration"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// namesWord reports whether msg holds word as a word of its own: not part
// of a longer name (CONFORMANCE is not named by CONFORMANCE_OTHER).
func namesWord(msg, word string) bool {
	for i := 0; ; {
		j := strings.Index(msg[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isNameByte(msg[start-1])) && (end == len(msg) || !isNameByte(msg[end])) {
			return true
		}
		i = start + 1
	}
}

func isNameByte(b byte) bool {
	return b == '_' || b == '-' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// jsonHeader adds a JSON Content-Type to h.
func jsonHeader(h http.Header) http.Header {
	h.Set("Content-Type", "application/json")
	return h
}

// statuses writes a list of statuses for a problem.
func statuses(want []int) string {
	parts := make([]string, len(want))
	for i, s := range want {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, " or ")
}

// brief is the start of a body, for a problem.
func brief(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "empty body"
	}
	return s
}

// A refusal is a check of the table's plainest shape: conformance-a
// reports scope, the answer to each request reqs makes (given
// conformance-a's token) is one of want, and a refusal naming each of
// words when there are words, and nothing reaches an upstream.
type refusal struct {
	scope entry
	want  []int
	words []string
	reqs  func(tokenA string) []Probe
}

// run is the check f describes.
func (f refusal) run(c *checkRun) {
	c.report(f.scope)
	for _, req := range f.reqs(c.s.tokenA) {
		if r := c.do(req); f.words != nil {
			c.refused(r, f.want, f.words...)
		} else {
			c.status(r, f.want...)
		}
	}
	c.nothingUpstream()
}

// scope is an entry of capability with words.
func scope(capability string, words ...string) entry {
	return entry{capability, words}
}
