package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/conformance"
	"github.com/intentius/boxbroker/internal/protocol"
)

// specIDs are the checks of the specification's "Testing a broker" table.
var specIDs = []string{
	"declaration-kept", "declaration-unknown-token", "declaration-malformed", "declaration-listing-spend",
	"unreported-refused", "inference-hello", "inference-forwards", "inference-unknown-route",
	"inference-unknown-token", "inference-agent-refused", "decide-answers", "decide-refused",
	"decide-invalid", "decide-unknown-token", "egress-forwards", "egress-refused", "egress-unheld",
	"egress-bad-name", "feedback-taken", "feedback-refused", "feedback-empty", "fountain-forwards",
	"fountain-refused", "payer-consistent", "token-isolation",
}

// statusOf returns each result's status by id.
func statusOf(rep conformance.Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Results {
		out[r.ID] = r.Status
	}
	return out
}

func TestRun_ReferenceBrokerPasses(t *testing.T) {
	rep, err := conformance.Run(t.Context(), referenceConfig(sound))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("problem: %s", p)
	}
	got := statusOf(rep)
	want := append(slices.Clone(specIDs), "extra-calendar-read", "extra-calendar-write")
	for _, id := range want {
		if got[id] != conformance.Passed {
			t.Errorf("check %s = %q, want passed", id, got[id])
		}
	}
	if len(rep.Results) != len(want) {
		t.Errorf("ran %d checks, want %d", len(rep.Results), len(want))
	}
	if last := rep.Results[len(rep.Results)-1].ID; last != "token-isolation" {
		t.Errorf("the last check is %s, want token-isolation", last)
	}
}

func TestRunTest_ReferenceBroker(t *testing.T) {
	conformance.RunTest(t, referenceConfig(sound))
}

func TestRun_BrokenBrokersFail(t *testing.T) {
	tests := []struct {
		name string
		flaw flaw
		want []string // the checks that must fail, and no others
	}{
		{"grants every scope", grantsEveryScope, []string{
			"unreported-refused", "inference-agent-refused", "decide-refused", "egress-refused",
			"feedback-refused", "fountain-refused", "extra-calendar-read", "extra-calendar-write",
		}},
		{"forwards the box's token", forwardsToken, []string{
			"inference-forwards", "decide-answers", "egress-forwards", "fountain-forwards", "token-isolation",
		}},
		{"decides without the model", decidesWithoutModel, []string{"decide-answers"}},
		{"answers a question with the wrong type", answersWrongType, []string{"decide-answers"}},
		{"sends the egress value to another host", egressElsewhere, []string{"egress-forwards"}},
		{"leaves the egress value in the echoed header", egressKeepsValue, []string{"egress-forwards", "token-isolation"}},
		{"says two payers", payerDisagrees, []string{"payer-consistent"}},
		{"merges each report into the last", mergesReports, []string{
			"inference-agent-refused", "decide-refused", "egress-refused", "extra-calendar-write",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := conformance.Run(t.Context(), referenceConfig(tt.flaw))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Status == conformance.Failed {
					failed = append(failed, r.ID)
				}
			}
			slices.Sort(failed)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(failed, want) {
				t.Errorf("failed checks = %q, want %q\nproblems:\n%s", failed, want, joinLines(rep.Problems))
			}
			if len(rep.Problems) == 0 {
				t.Errorf("Report.Problems is empty for a failing broker")
			}
		})
	}
}

func joinLines(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

func TestRun_SkipsUnservedCapabilities(t *testing.T) {
	cfg := referenceConfig(sound)
	cfg.Capabilities = nil // inference, egress and feedback, as studio's lobby
	cfg.Extra = nil
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := statusOf(rep)
	for _, id := range specIDs {
		want := conformance.Passed
		if id == "fountain-forwards" || id == "fountain-refused" {
			want = conformance.Skipped
		}
		if got[id] != want {
			t.Errorf("check %s = %q, want %q", id, got[id], want)
		}
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems: %q", rep.Problems)
	}
}

func TestRun_RefusesUnusableConfig(t *testing.T) {
	start := startReference(sound)
	tests := []struct {
		name string
		cfg  conformance.Config
	}{
		{"no Start", conformance.Config{Name: "none"}},
		{"an unknown standard capability", conformance.Config{Start: start, Capabilities: []string{"calendar"}}},
		{"a probe outside its prefix", conformance.Config{Start: start, Extra: []conformance.Extra{{
			Name: "calendar", Prefix: "/calendar/", Probes: map[string]conformance.Probe{"read": {Path: "/elsewhere"}},
		}}}},
		{"Start fails", conformance.Config{Start: func(context.Context, conformance.Env) (*conformance.Started, error) {
			return nil, errors.New("no broker here")
		}}},
		{"a box without a token", conformance.Config{Start: func(context.Context, conformance.Env) (*conformance.Started, error) {
			return &conformance.Started{URL: "http://127.0.0.1:1", Tokens: map[string]string{conformance.BoxReporting: "t"}}, nil
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := conformance.Run(t.Context(), tt.cfg); err == nil {
				t.Errorf("Run(%s) = nil error, want one", tt.name)
			}
		})
	}
}

func TestRun_GivesStartTheEnv(t *testing.T) {
	var got conformance.Env
	cfg := referenceConfig(sound)
	cfg.Broker = "conformance-house"
	inner := cfg.Start
	cfg.Start = func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
		got = env
		return inner(ctx, env)
	}
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("problems with broker word %q: %q", cfg.Broker, rep.Problems)
	}
	if got.Broker != "conformance-house" {
		t.Errorf("Env.Broker = %q, want %q", got.Broker, "conformance-house")
	}
	if !slices.Equal(got.Boxes, []string{conformance.BoxReporting, conformance.BoxSilent}) {
		t.Errorf("Env.Boxes = %q", got.Boxes)
	}
	if len(got.Secrets) != 1 || got.Secrets[0].Name != conformance.SecretName || got.Secrets[0].Box != conformance.BoxReporting ||
		got.Secrets[0].Value == "" || got.Secrets[0].Host == "" {
		t.Errorf("Env.Secrets = %+v, want CONFORMANCE for conformance-a", got.Secrets)
	}
	for _, u := range []conformance.Upstream{got.Anthropic, got.Fountain} {
		if u.URL == "" || u.Credential == "" {
			t.Errorf("upstream %+v lacks a URL or credential", u)
		}
	}
	if !protocol.IsCapabilityName(conformance.BoxReporting) || !protocol.IsCapabilityName(conformance.BoxSilent) {
		t.Errorf("box names are not names")
	}
}

func TestSchema_IsTheProtocolsSchema(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "testdata", "broker-protocol.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(conformance.Schema(), want) {
		t.Errorf("conformance/schema/broker-protocol.schema.json differs from testdata/broker-protocol.schema.json; copy it again")
	}
}

// rewrite is a broken broker made from the reference one by changing the
// answers to the requests match selects.
type rewrite struct {
	match  func(r *http.Request) bool
	answer func(status int, body []byte) (int, []byte)
}

func (rw rewrite) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !rw.match(r) {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		status, body := rw.answer(rec.Code, rec.Body.Bytes())
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
}

// wrapper is a broken broker made from the reference one: a rewrite of
// its answers, or a reshape of the requests it is given.
type wrapper interface {
	wrap(http.Handler) http.Handler
}

// reshape is a broken broker made from the reference one by changing
// the requests match selects before it serves them.
type reshape struct {
	match   func(r *http.Request) bool
	request func(r *http.Request)
}

func (rs reshape) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rs.match(r) {
			rs.request(r)
		}
		h.ServeHTTP(w, r)
	})
}

// answerHeader is a broken broker made from the reference one by setting
// a header of the answers to the requests match selects to value, or
// removing it when value is "".
type answerHeader struct {
	match       func(r *http.Request) bool
	name, value string
}

func (ah answerHeader) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ah.match(r) {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Del(ah.name)
		if ah.value != "" {
			w.Header().Set(ah.name, ah.value)
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// on matches a method and a path.
func on(method, path string) func(*http.Request) bool {
	return func(r *http.Request) bool { return r.Method == method && r.URL.Path == path }
}

// flip turns an answer of status from into one of status to with body.
func flip(from, to int, body string) func(int, []byte) (int, []byte) {
	return func(status int, b []byte) (int, []byte) {
		if status == from {
			return to, []byte(body)
		}
		return status, b
	}
}

// unreported turns the rule's refusal of a box that never reported into
// one of status to with body (the refusal's own body when body is "").
func unreported(to int, body string) func(int, []byte) (int, []byte) {
	return func(status int, b []byte) (int, []byte) {
		if status != http.StatusForbidden || !bytes.Contains(b, []byte("has no declaration")) {
			return status, b
		}
		if body != "" {
			b = []byte(body)
		}
		return to, b
	}
}

// edit changes a JSON answer's decoded value.
func edit(change func(v map[string]any)) func(int, []byte) (int, []byte) {
	return func(status int, b []byte) (int, []byte) {
		var v map[string]any
		if json.Unmarshal(b, &v) != nil {
			return status, b
		}
		change(v)
		out, _ := json.Marshal(v)
		return status, out
	}
}

func TestRun_EachCheckCanFail(t *testing.T) {
	const kept = `{"capabilities":[],"at":"2026-01-01T00:00:00.000Z"}`
	tests := []struct {
		name    string
		rewrite wrapper
		want    []string
	}{
		{"keeps another broker's entry", rewrite{on(http.MethodPost, "/api/box/declaration"), edit(func(v map[string]any) {
			caps, _ := v["capabilities"].([]any)
			v["capabilities"] = append(caps, map[string]any{"name": "egress", "broker": "conformance-elsewhere", "scope": []any{"CONFORMANCE"}})
		})}, []string{"declaration-kept"}},
		{"takes a report with no token", rewrite{on(http.MethodPost, "/api/box/declaration"), flip(401, 200, kept)}, []string{"declaration-unknown-token"}},
		{"takes a malformed report", rewrite{on(http.MethodPost, "/api/box/declaration"), flip(400, 200, kept)}, []string{"declaration-malformed"}},
		// declaration-unknown-token and declaration-malformed are one
		// helper: the 400 to a malformed report must be a refusal, the 401
		// to a report with no token need not.
		{"answers a malformed report 400 with no refusal", rewrite{on(http.MethodPost, "/api/box/declaration"), flip(400, 400, `{"ok":false}`)}, []string{"declaration-malformed"}},
		{"answers a report with no token 401 with no refusal", rewrite{on(http.MethodPost, "/api/box/declaration"), flip(401, 401, `not JSON`)}, nil},
		{"echoes the spend changed", rewrite{on(http.MethodPost, "/api/box/declaration"), edit(func(v map[string]any) {
			if s, ok := v["spend"].(map[string]any); ok {
				s["usd"] = 1.23
			}
		})}, []string{"declaration-listing-spend"}},
		{"asks a token of hello", rewrite{on(http.MethodHead, "/llm/anthropic/api/hello"), flip(200, 401, "")}, []string{"inference-hello"}},
		{"answers an unknown route", rewrite{on(http.MethodPost, "/llm/anthropic/v1/complete"), flip(404, 200, `{}`)}, []string{"inference-unknown-route"}},
		{"answers an unknown Anthropic token 401", rewrite{on(http.MethodPost, "/llm/anthropic/v1/messages"), func(status int, b []byte) (int, []byte) {
			if status == 403 && bytes.Contains(b, []byte("no box's")) {
				return 401, b
			}
			return status, b
		}}, []string{"inference-unknown-token"}},
		// unreported-refused holds every capability to the rule's 403,
		// whose message names the capability and the word.
		{"answers an unreported box's egress 401", rewrite{on(http.MethodGet, "/egress/CONFORMANCE/some/path"), unreported(401, "")}, []string{"unreported-refused"}},
		{"answers an unreported box's Fountain call 401", rewrite{on(http.MethodGet, "/fountain/api/sandboxes"), unreported(401, "")}, []string{"unreported-refused"}},
		{"refuses an unreported box's batches naming nothing", rewrite{on(http.MethodPost, "/api/feedback"),
			unreported(403, `{"error":"This box may not send feedback."}`)}, []string{"unreported-refused"}},
		{"refuses an unreported box's extra probe naming another word", rewrite{on(http.MethodPost, "/calendar/events"),
			unreported(403, `{"error":"This box declares no calendar read."}`)}, []string{"unreported-refused"}},
		// inference-forwards holds the call's query and body, and the
		// upstream's answer, unchanged.
		{"drops a Messages call's query", reshape{on(http.MethodPost, "/llm/anthropic/v1/messages"), func(r *http.Request) {
			r.URL.RawQuery = ""
		}}, []string{"inference-forwards"}},
		{"forwards a Messages call's body re-encoded", reshape{on(http.MethodPost, "/llm/anthropic/v1/messages"), func(r *http.Request) {
			var v any
			b, _ := io.ReadAll(r.Body)
			if json.Unmarshal(b, &v) == nil {
				b, _ = json.Marshal(v)
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}}, []string{"inference-forwards"}},
		{"changes a Messages answer", rewrite{on(http.MethodPost, "/llm/anthropic/v1/messages"), func(status int, b []byte) (int, []byte) {
			if status != http.StatusOK {
				return status, b
			}
			return status, bytes.Replace(b, []byte("Hello"), []byte("Hullo"), 1)
		}}, []string{"inference-forwards"}},
		{"answers decide naming another model", rewrite{on(http.MethodPost, "/decide/v1/systemone"), edit(func(v map[string]any) {
			if _, ok := v["answers"]; ok {
				v["model"] = "claude-conformance-other"
			}
		})}, []string{"decide-answers"}},
		// payer-consistent holds every answer from /llm/anthropic and
		// /decide to the declaration's payer.
		{"says no payer on a decide answer", answerHeader{on(http.MethodPost, "/decide/v1/systemone"), protocol.HeaderPayer, ""}, []string{"payer-consistent"}},
		{"says another payer on a models answer", answerHeader{on(http.MethodGet, "/llm/anthropic/v1/models"), protocol.HeaderPayer, "owner github:someone-else"},
			[]string{"payer-consistent"}},
		{"takes a decide request with no question", rewrite{on(http.MethodPost, "/decide/v1/systemone"), flip(422, 200, `{"model":"m","answers":{}}`)}, []string{"decide-invalid"}},
		{"answers decide for an unknown token", rewrite{func(r *http.Request) bool {
			return r.URL.Path == "/decide/v1/systemone" && strings.Contains(r.Header.Get("Authorization"), "conformance-unknown")
		}, flip(403, 200, `{"model":"m","answers":{}}`)}, []string{"decide-unknown-token"}},
		{"answers an unheld secret", rewrite{on(http.MethodGet, "/egress/CONFORMANCE_UNHELD/some/path"), flip(403, 200, `{}`)}, []string{"egress-unheld"}},
		{"serves a bad secret name", rewrite{on(http.MethodGet, "/egress/not-a-name/some/path"), flip(404, 403, `{"error":"no"}`)}, []string{"egress-bad-name"}},
		{"refuses entries by the declaration", rewrite{on(http.MethodPost, "/api/feedback"), flip(202, 403,
			`{"error":"This box's feedback capability does not list agent in its scope."}`)}, []string{"feedback-taken"}},
		{"takes an empty batch", rewrite{on(http.MethodPost, "/api/feedback"), flip(400, 202, `{}`)}, []string{"feedback-empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := referenceConfig(sound)
			cfg.Start = func(ctx context.Context, env conformance.Env) (*conformance.Started, error) {
				b, err := newReference(env, sound)
				if err != nil {
					return nil, err
				}
				srv := httptest.NewServer(tt.rewrite.wrap(b))
				tokens := map[string]string{}
				for token, box := range b.boxes {
					tokens[box] = token
				}
				return &conformance.Started{URL: srv.URL, Tokens: tokens, Close: func() error { srv.Close(); return nil }}, nil
			}
			rep, err := conformance.Run(t.Context(), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var failed []string
			for _, r := range rep.Results {
				if r.Status == conformance.Failed {
					failed = append(failed, r.ID)
				}
			}
			if !slices.Equal(failed, tt.want) {
				t.Errorf("failed checks = %q, want %q\nproblems:\n%s", failed, tt.want, joinLines(rep.Problems))
			}
		})
	}
}
