// Package conformance holds any broker to the Broker Protocol, version 1:
// every check of the specification's "Testing a broker" table, by the same
// ids, plus one per scope word of each capability an operator adds.
//
// The suite serves its own upstreams on loopback ports: a stand-in for the
// Anthropic API that answers a structured-output request from its schema,
// one for Fountain's API, and an echo host for egress that repeats the
// authorization it received in a response header. It records every request
// they receive, then calls Config.Start to start the broker pointed at
// them, and talks to the broker as two boxes: conformance-a, which reports
// its declaration before each check, and conformance-b, which never does.
//
// Run returns a Report and loads no test runner's state; RunTest makes one
// subtest per check for go test:
//
//	func TestConformance(t *testing.T) {
//		conformance.RunTest(t, conformance.Config{
//			Name:  "my broker",
//			Start: func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
//				// Start the broker on 127.0.0.1 port 0, pointed at env.Anthropic,
//				// env.Fountain and env.Secrets, with a token for each of env.Boxes.
//			},
//		})
//	}
//
// A check that expects a refusal also fails when anything reached an
// upstream during it. Checks run one at a time, in the table's order, and
// token-isolation runs last, over everything the run saw.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// The boxes the suite talks to the broker as.
const (
	// BoxReporting reports a declaration before each check.
	BoxReporting = "conformance-a"
	// BoxSilent never reports, so the broker must refuse it everything.
	BoxSilent = "conformance-b"
)

// SecretName is the egress secret the suite gives conformance-a.
const SecretName = "CONFORMANCE"

// Result statuses.
const (
	Passed  = "passed"
	Failed  = "failed"
	Skipped = "skipped"
)

// DefaultBroker is the broker word the boxes' reports name when
// Config.Broker is empty.
const DefaultBroker = "lobby"

// DefaultTimeout bounds each request the suite makes when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Upstream is one stand-in upstream: its base URL and the credential the
// broker must spend there.
type Upstream struct {
	URL        string
	Credential string
}

// Secret is an egress secret the broker holds for a box: the value to send
// in place of the box's token, only to Host.
type Secret struct {
	Box   string
	Name  string
	Host  string
	Value string
}

// Env is what Config.Start is given to start a broker against the suite's
// stand-ins.
type Env struct {
	// Broker is the broker word the boxes' reports name.
	Broker string
	// Boxes are the boxes the broker must give tokens: BoxReporting and BoxSilent.
	Boxes []string
	// Anthropic is the upstream for /llm/anthropic and /decide, and the API
	// key to spend there.
	Anthropic Upstream
	// Fountain is the upstream for /fountain, and the bearer to send there.
	Fountain Upstream
	// Secrets are the egress secrets the broker holds: CONFORMANCE for
	// conformance-a, whose Host is the echo host's base URL.
	Secrets []Secret
}

// Started is a broker Config.Start started.
type Started struct {
	// URL is the broker's base URL.
	URL string
	// Tokens holds each box's token by box name; every box of Env.Boxes
	// needs one, and no two may be the same.
	Tokens map[string]string
	// Close stops the broker; nil means there is nothing to stop.
	Close func() error
}

// Extra is a capability an operator adds to the standard ones. For each
// scope word in Probes the suite checks, as extra-<Name>-<word>, that the
// probe is a 403 naming Name and the word when the box's scope lacks the
// word, and is not refused by the declaration when the scope has it.
type Extra struct {
	// Name is the capability's name in the box block.
	Name string
	// Prefix is the capability's route prefix; every probe's path lies under it.
	Prefix string
	// Probes holds, for each scope word, a request that needs that word.
	Probes map[string]Probe
}

// Probe is a request to the broker. The suite adds the box's token as the
// bearer unless Header already carries an Authorization.
type Probe struct {
	// Method is the request method; empty means GET.
	Method string
	// Path is the path from the broker's base URL, query included.
	Path string
	// Body is the request body; nil means none.
	Body []byte
	// Header holds extra request headers; nil means none.
	Header http.Header
}

// Config says which broker the suite checks and how to start it.
type Config struct {
	// Name names the broker in the report.
	Name string
	// Broker is the broker word the boxes' reports name; empty means DefaultBroker.
	Broker string
	// Start starts the broker pointed at env's upstreams. It is called once
	// per run, and the suite calls the Started's Close when it is done.
	Start func(ctx context.Context, env Env) (*Started, error)
	// Capabilities are the standard capabilities the broker serves, of
	// inference, egress, feedback and fountain; nil means inference, egress
	// and feedback, as studio's lobby serves. The checks of the others are
	// skipped. decide belongs to inference.
	Capabilities []string
	// Extra are capabilities an operator adds.
	Extra []Extra
	// Timeout bounds each request the suite makes; zero means DefaultTimeout.
	Timeout time.Duration
}

// Result is the outcome of one check.
type Result struct {
	// ID is the check's id, as the specification's table names it.
	ID string
	// Status is Passed, Failed or Skipped.
	Status string
	// Problems says what failed; it is empty unless Status is Failed.
	Problems []string
}

// Report is the outcome of a run.
type Report struct {
	// Name is Config.Name.
	Name string
	// Results holds one Result per check, in the order they ran.
	Results []Result
	// Problems holds "<id>: <problem>" for every problem of every check;
	// the broker passes when it is empty.
	Problems []string
}

// add appends r to the report.
func (rep *Report) add(r Result) {
	rep.Results = append(rep.Results, r)
	for _, p := range r.Problems {
		rep.Problems = append(rep.Problems, r.ID+": "+p)
	}
}

// Run starts the stand-ins and the broker, runs every check and stops
// them. It returns an error, and no report, when the broker cannot be
// started or cfg is unusable; a broker that fails a check is a Report with
// Problems. An error stopping the broker is returned beside the report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	s, err := start(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Name: cfg.Name}
	for _, c := range s.checks() {
		rep.add(s.run(ctx, c))
	}
	return rep, s.close()
}

// RunTest runs the suite under t, one subtest per check named by its id.
// A skipped check is skipped, and each problem fails its subtest.
func RunTest(t *testing.T, cfg Config) {
	t.Helper()
	s, err := start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start the conformance suite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.close(); err != nil {
			t.Errorf("stop the broker: %v", err)
		}
	})
	for _, c := range s.checks() {
		t.Run(c.id, func(t *testing.T) {
			r := s.run(t.Context(), c)
			if r.Status == Skipped {
				t.Skipf("the broker does not serve %s", c.capability)
			}
			for _, p := range r.Problems {
				t.Error(p)
			}
		})
	}
}

// suite is one run: the stand-ins, the broker and what was said to it.
type suite struct {
	cfg       Config
	env       Env
	serves    map[string]bool
	stands    *standIns
	broker    *Started
	base      *url.URL
	tokenA    string
	tokenB    string
	client    *http.Client
	validator *validator
	// replies is every answer the broker gave the suite, for token-isolation;
	// checks run one at a time, so it needs no lock.
	replies []reply
}

// start validates cfg, serves the stand-ins and starts the broker.
func start(ctx context.Context, cfg Config) (*suite, error) {
	if cfg.Start == nil {
		return nil, errors.New("conformance: Config.Start is nil")
	}
	if cfg.Broker == "" {
		cfg.Broker = DefaultBroker
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Capabilities == nil {
		cfg.Capabilities = []string{protocol.Inference, protocol.Egress, protocol.Feedback}
	}
	serves := map[string]bool{}
	for _, c := range cfg.Capabilities {
		switch c {
		case protocol.Inference, protocol.Egress, protocol.Feedback, protocol.Fountain:
			serves[c] = true
		default:
			return nil, fmt.Errorf("conformance: %q is not a standard capability; give it as an Extra", c)
		}
	}
	for _, x := range cfg.Extra {
		if !protocol.IsCapabilityName(x.Name) || serves[x.Name] {
			return nil, fmt.Errorf("conformance: extra capability %q is not a capability name of its own", x.Name)
		}
		if len(x.Probes) == 0 {
			return nil, fmt.Errorf("conformance: extra capability %s has no probes", x.Name)
		}
		for word, p := range x.Probes {
			if word == "" || !strings.HasPrefix(p.Path, x.Prefix) || x.Prefix == "" {
				return nil, fmt.Errorf("conformance: the probe of %s for %q is not under its prefix %q", x.Name, word, x.Prefix)
			}
		}
		serves[x.Name] = true
	}
	v, err := newValidator()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	// Every request on a connection of its own: no check's answer can
	// depend on the state another left a kept-alive connection in. (With
	// connections kept, about one run in ten of the suite's own tests saw
	// a Messages call cut off right after a check whose answer the test
	// rewrites: the reference broker's request was cancelled mid-answer.)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DisableKeepAlives = true
	s := &suite{cfg: cfg, serves: serves, validator: v, client: &http.Client{Timeout: cfg.Timeout, Transport: transport}}
	s.env = Env{
		Broker:    cfg.Broker,
		Boxes:     []string{BoxReporting, BoxSilent},
		Anthropic: Upstream{Credential: "sk-ant-api03-conformance-" + randomHex(24)},
		Fountain:  Upstream{Credential: "fountain-conformance-" + randomHex(24)},
	}
	s.stands = startStandIns(s.env.Anthropic.Credential, s.env.Fountain.Credential)
	s.env.Anthropic.URL = s.stands.anthropic.URL
	s.env.Fountain.URL = s.stands.fountain.URL
	s.env.Secrets = []Secret{{Box: BoxReporting, Name: SecretName, Host: s.stands.echo.URL, Value: "conformance-secret-" + randomHex(24)}}
	b, err := cfg.Start(ctx, s.env)
	if err != nil {
		s.stands.close()
		return nil, fmt.Errorf("conformance: start the broker: %w", err)
	}
	if b == nil {
		s.stands.close()
		return nil, errors.New("conformance: Start returned no broker")
	}
	s.broker = b
	if err := s.takeStarted(); err != nil {
		_ = s.close()
		return nil, err
	}
	return s, nil
}

// takeStarted checks what Start returned and keeps its URL and tokens.
func (s *suite) takeStarted() error {
	u, err := url.Parse(strings.TrimSuffix(s.broker.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("conformance: the broker's URL %q is not an http(s) base URL", s.broker.URL)
	}
	s.base = u
	s.tokenA, s.tokenB = s.broker.Tokens[BoxReporting], s.broker.Tokens[BoxSilent]
	if s.tokenA == "" || s.tokenB == "" || s.tokenA == s.tokenB {
		return fmt.Errorf("conformance: Start must give %s and %s a token each, and not the same one", BoxReporting, BoxSilent)
	}
	return nil
}

// close stops the broker and the stand-ins.
func (s *suite) close() error {
	var err error
	if s.broker != nil && s.broker.Close != nil {
		err = s.broker.Close()
	}
	s.stands.close()
	return err
}

// check is one check of the suite.
type check struct {
	id string
	// capability is what the broker must serve for the check to run; ""
	// for a check every broker must pass.
	capability string
	run        func(c *checkRun)
}

// run runs c and returns its result.
func (s *suite) run(ctx context.Context, c check) Result {
	if c.capability != "" && !s.serves[c.capability] {
		return Result{ID: c.id, Status: Skipped}
	}
	cr := &checkRun{ctx: ctx, s: s, mark: s.stands.log.len()}
	c.run(cr)
	if len(cr.problems) > 0 {
		return Result{ID: c.id, Status: Failed, Problems: cr.problems}
	}
	return Result{ID: c.id, Status: Passed}
}

// checkRun is one check running: what it found wrong so far.
type checkRun struct {
	ctx      context.Context
	s        *suite
	problems []string
	// mark is the length of the upstream log when the check, or its last
	// step, began.
	mark int
}

// fail records a problem.
func (c *checkRun) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// reply is an answer from the broker.
type reply struct {
	what   string // "METHOD path", for problems
	Status int
	Header http.Header
	Body   []byte
}

// do sends req to the broker and records its answer. It records a
// transport error as a problem and returns nil for it.
func (c *checkRun) do(req Probe) *reply {
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	what := req.Method + " " + req.Path
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(c.ctx, req.Method, c.s.base.String()+req.Path, body)
	if err != nil {
		c.fail("%s: %v", what, err)
		return nil
	}
	for k, vs := range req.Header {
		hr.Header[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	resp, err := c.s.client.Do(hr)
	if err != nil {
		c.fail("%s: %v", what, err)
		return nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := reply{what: what, Status: resp.StatusCode, Header: resp.Header, Body: b}
	c.s.replies = append(c.s.replies, r)
	if err != nil {
		c.fail("%s: reading the answer: %v", what, err)
		return nil
	}
	return &r
}

// bearer is a header with token as the bearer.
func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
