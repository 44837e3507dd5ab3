package cloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/clocktest"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
)

// claudeCodeBetas are betas Claude Code sends, most of which Bedrock
// does not know.
var claudeCodeBetas = []string{
	"claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14",
	"fine-grained-tool-streaming-2025-05-14, mcp-servers-2025-12-04",
	"extended-cache-ttl-2025-04-11,context-1m-2025-08-07",
}

// client is a cloud.Client going to the stand-in, its log in a buffer.
func client(c *cloudtest.Cloud) (*cloud.Client, *brokertest.Buffer) {
	var log brokertest.Buffer
	return &cloud.Client{Transport: c.Transport(), Log: slog.New(slog.NewTextHandler(&log, nil))}, &log
}

// do makes a call of path with body and the box's betas on the sealed
// credential, and returns the answer's status and body, and the values
// made for it.
func do(t *testing.T, cl *cloud.Client, sealed, path, body string, betas []string) (int, string, []string) {
	t.Helper()
	cred, err := cloud.Parse([]byte(sealed))
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	resp, err := cl.Do(context.Background(), cred, cloud.Call{Method: "POST", Path: path, Beta: betas, Body: []byte(body)}, func(v string) { made = append(made, v) })
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b), made
}

func message(model string, stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{` + s + `"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
}

// sentBetas are the betas each request in seen carried: Bedrock's in
// the body's anthropic_beta (CountTokens' in the body inside), Vertex
// AI's in the anthropic-beta header.
func sentBetas(t *testing.T, kind string, seen []brokertest.Seen) [][]string {
	t.Helper()
	var out [][]string
	for _, s := range seen {
		if s.Path == "/token" || s.Path == "/" {
			continue
		}
		if kind == "vertex" {
			var list []string
			for _, v := range s.Header.Values("Anthropic-Beta") {
				list = append(list, strings.Split(v, ",")...)
			}
			out = append(out, list)
			continue
		}
		body := s.Body
		var ct struct {
			Input struct {
				InvokeModel struct {
					Body []byte `json:"body"`
				} `json:"invokeModel"`
			} `json:"input"`
		}
		if strings.HasSuffix(s.Path, "/count-tokens") && json.Unmarshal(body, &ct) == nil {
			body = ct.Input.InvokeModel.Body
		}
		var m struct {
			Beta []string `json:"anthropic_beta"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("%s: the body is not JSON: %s", s.Path, s.Body)
		}
		out = append(out, m.Beta)
	}
	return out
}

// TestBedrock_UnknownBetasAreDropped: of Claude Code's betas, Bedrock is
// sent only those of the default allow-list, in Messages, streams and
// CountTokens alike, and takes them.
func TestBedrock_UnknownBetasAreDropped(t *testing.T) {
	c := cloudtest.New(t, "bedrock", nil)
	cl, _ := client(c)
	for _, call := range []struct{ path, body string }{
		{cloud.PathMessages, message("claude-sonnet-4-5", false)},
		{cloud.PathMessages, message("claude-sonnet-4-5", true)},
		{cloud.PathCountTokens, message("claude-sonnet-4-5", false)},
	} {
		if status, body, _ := do(t, cl, c.Sealed, call.path, call.body, claudeCodeBetas); status != 200 {
			t.Fatalf("%s: %d %s", call.path, status, body)
		}
	}
	want := []string{"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"}
	got := sentBetas(t, "bedrock", c.Recorder.Seen())
	if len(got) != 3 {
		t.Fatalf("Bedrock got %d calls, want 3", len(got))
	}
	for i, b := range got {
		if !slices.Equal(b, want) {
			t.Errorf("call %d sent betas %q, want %q", i, b, want)
		}
	}
	if n := c.Refused(); n != 0 {
		t.Errorf("the stand-in refused %d calls", n)
	}
}

// TestCloud_BetasOverride: a credential's "betas" is what reaches the
// cloud, on both; ["*"] is every one; and Vertex AI is sent every beta
// without it.
func TestCloud_BetasOverride(t *testing.T) {
	box := []string{"claude-code-20250219,context-1m-2025-08-07", "oauth-2025-04-20"}
	tests := []struct {
		kind  string
		betas any // the credential's "betas"; nil: none given
		want  []string
	}{
		{"bedrock", []string{"claude-code-20250219", "oauth-2025-04-20"}, []string{"claude-code-20250219", "oauth-2025-04-20"}},
		{"bedrock", []string{"*"}, []string{"claude-code-20250219", "context-1m-2025-08-07", "oauth-2025-04-20"}},
		{"bedrock", []string{}, nil},
		{"vertex", nil, []string{"claude-code-20250219", "context-1m-2025-08-07", "oauth-2025-04-20"}},
		{"vertex", []string{"context-1m-2025-08-07"}, []string{"context-1m-2025-08-07"}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			c := cloudtest.New(t, tt.kind, nil)
			if c.Bedrock != nil {
				// This model takes Claude Code's betas too.
				c.Bedrock.Betas = map[string][]string{"anthropic.claude-sonnet-4-5-20250929-v1:0": {"claude-code-20250219", "context-1m-2025-08-07", "oauth-2025-04-20"}}
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(c.Credential), &m)
			if tt.betas != nil {
				m["betas"] = tt.betas
			}
			raw, _ := json.Marshal(m)
			sealed, err := cloud.Check(tt.kind, raw)
			if err != nil {
				t.Fatal(err)
			}
			cl, _ := client(c)
			if status, body, _ := do(t, cl, string(sealed), cloud.PathMessages, message("claude-sonnet-4-5", false), box); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			got := sentBetas(t, tt.kind, c.Recorder.Seen())
			if len(got) != 1 || !slices.Equal(got[0], tt.want) {
				t.Errorf("the cloud was sent betas %q, want %q", got, tt.want)
			}
			if n := c.Refused(); n != 0 {
				t.Errorf("the stand-in refused %d calls", n)
			}
		})
	}
}

// TestCloud_ModelRefusingBetasFallsBack: a model that takes no beta
// refuses the first call, which is made again without any and succeeds;
// later calls to it (a stream too) send none from the first; one line
// tells the log. Another model still gets its betas.
func TestCloud_ModelRefusingBetasFallsBack(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			cl, log := client(c)
			status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-nobeta", false), claudeCodeBetas)
			if status != 200 {
				t.Fatalf("first call: %d %s", status, body)
			}
			got := sentBetas(t, kind, c.Recorder.Seen())
			if len(got) != 2 || len(got[0]) == 0 || len(got[1]) != 0 {
				t.Fatalf("the first call sent %q, want betas then none", got)
			}
			if n := c.Refused(); n != 1 {
				t.Errorf("the stand-in refused %d calls, want the first one", n)
			}
			for _, stream := range []bool{false, true} {
				if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-nobeta", stream), claudeCodeBetas); status != 200 {
					t.Fatalf("later call (stream %v): %d %s", stream, status, body)
				}
			}
			got = sentBetas(t, kind, c.Recorder.Seen())
			if len(got) != 4 || len(got[2]) != 0 || len(got[3]) != 0 {
				t.Errorf("the later calls sent %q, want one request each with no betas", got[2:])
			}
			if n := c.Refused(); n != 1 {
				t.Errorf("the stand-in refused %d calls, want only the first one", n)
			}
			if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), claudeCodeBetas); status != 200 {
				t.Fatalf("another model: %d %s", status, body)
			}
			if got = sentBetas(t, kind, c.Recorder.Seen()); len(got) != 5 || len(got[4]) == 0 {
				t.Errorf("another model was sent %q, want its betas", got[4:])
			}
			l := log.String()
			if strings.Count(l, "\n") != 1 || !strings.Contains(l, "level=INFO") || !strings.Contains(l, "kind="+kind) || !strings.Contains(l, "nobeta") {
				t.Errorf("the log says %q, want one info line naming the kind and model", l)
			}
			for _, s := range c.Secrets {
				if strings.Contains(l, s) {
					t.Errorf("the log holds a secret")
				}
			}
		})
	}
}

// TestCloud_OneBoxsRefusedBetaLeavesOthersTheirs: a box that sends a
// beta the model refuses (a hostile box, or one whose client is newer)
// has its calls made again without betas, and has them so from then on;
// another box sending other betas to the same model of the same account
// still has its own sent, and answered.
func TestCloud_OneBoxsRefusedBetaLeavesOthersTheirs(t *testing.T) {
	const takes, refused = "context-1m-2025-08-07", "computer-use-2024-10-22"
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			if kind == "bedrock" {
				c.Bedrock.Betas = map[string][]string{"anthropic.claude-sonnet-4-5-20250929-v1:0": {takes}}
			} else {
				c.Vertex.Betas = map[string][]string{"claude-sonnet-4-5@20250929": {takes}}
			}
			cl, _ := client(c)
			// The hostile box's call: refused with its beta, made again
			// without, twice (the second from the first try).
			for range 2 {
				if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), []string{refused}); status != 200 {
					t.Fatalf("the call with a refused beta = %d %s, want it made again without", status, body)
				}
			}
			if got := sentBetas(t, kind, c.Recorder.Seen()); len(got) != 3 || len(got[0]) == 0 || len(got[1]) != 0 || len(got[2]) != 0 {
				t.Fatalf("the box sending a refused beta had %q sent, want it, then none, then none", got)
			}
			// Another box's call to the same model keeps its beta.
			if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), []string{takes}); status != 200 {
				t.Fatalf("another box's call = %d %s", status, body)
			}
			got := sentBetas(t, kind, c.Recorder.Seen())
			if len(got) != 4 || !slices.Equal(got[3], []string{takes}) {
				t.Errorf("another box's call sent %q, want its own beta %s: one box's refused beta took it away", got[3:], takes)
			}
			if n := c.Refused(); n != 1 {
				t.Errorf("the stand-in refused %d calls, want only the hostile box's first", n)
			}
		})
	}
}

// TestCloud_NoFallbackForOther400s: a 400 that is not about betas is the
// box's answer at once, with betas sent; so is a beta refusal when no
// beta was sent (no second try).
func TestCloud_NoFallbackForOther400s(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			cl, log := client(c)
			status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-invalid", false), claudeCodeBetas)
			if status != 400 || !strings.Contains(body, "invalid_request_error") || !strings.Contains(body, "text content blocks must be non-empty") {
				t.Errorf("= %d %s, want the cloud's 400", status, body)
			}
			if n := len(sentBetas(t, kind, c.Recorder.Seen())); n != 1 {
				t.Errorf("the cloud got %d model calls, want 1", n)
			}
			// The model list and other refusals are not retried either.
			if status, _, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-throttle", false), claudeCodeBetas); kind == "bedrock" && status != 429 {
				t.Errorf("throttled = %d, want 429", status)
			}
			if log.String() != "" {
				t.Errorf("the log says %q, want nothing", log.String())
			}
		})
	}
}

// TestBedrock_ProfilePrefixesBuiltInIDs: with "profile", a built-in id
// goes as the profile's (the newer models are offered only so); a
// "models" entry as given; count_tokens gets the bare id.
func TestBedrock_ProfilePrefixesBuiltInIDs(t *testing.T) {
	c := cloudtest.New(t, "bedrock", map[string]string{"claude-mine": "anthropic.claude-mine-v1"})
	var m map[string]any
	_ = json.Unmarshal([]byte(c.Credential), &m)
	m["profile"] = "eu"
	raw, _ := json.Marshal(m)
	sealed, err := cloud.Check("bedrock", raw)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := client(c)
	calls := []struct{ path, model, want string }{
		{cloud.PathMessages, "claude-opus-4-7", "/model/eu.anthropic.claude-opus-4-7/invoke"},
		{cloud.PathMessages, "claude-opus-4-6", "/model/eu.anthropic.claude-opus-4-6-v1/invoke"},
		{cloud.PathMessages, "claude-haiku-4-5", "/model/eu.anthropic.claude-haiku-4-5-20251001-v1:0/invoke"},
		{cloud.PathMessages, "claude-mine", "/model/anthropic.claude-mine-v1/invoke"},
		{cloud.PathCountTokens, "claude-opus-4-7", "/model/anthropic.claude-opus-4-7/count-tokens"},
	}
	for i, call := range calls {
		if status, body, _ := do(t, cl, string(sealed), call.path, message(call.model, false), nil); status != 200 {
			t.Fatalf("%s %s: %d %s", call.path, call.model, status, body)
		}
		if seen := c.Recorder.Seen(); len(seen) != i+1 || seen[i].Path != call.want {
			t.Errorf("%s %s went to %v, want %s", call.path, call.model, seen[len(seen)-1].Path, call.want)
		}
	}
}

// roleCall makes a Messages call on the stand-in's role credential.
func roleCall(t *testing.T, cl *cloud.Client, sealed string) (int, string, []string) {
	t.Helper()
	return do(t, cl, sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil)
}

// TestBedrock_RoleSessionSignsTheCalls: with role_arn, the calls are
// signed with a session of the role (the stand-in refuses the key
// itself), assumed once with the external id and reused across calls.
func TestBedrock_RoleSessionSignsTheCalls(t *testing.T) {
	c := cloudtest.New(t, "bedrock", nil)
	_, sealed := c.RoleCredential(t, "ext-standin-1", nil)
	cl, _ := client(c)
	for i := 0; i < 3; i++ {
		status, body, made := roleCall(t, cl, sealed)
		if status != 200 {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
		ses := c.Bedrock.STS.Minted()
		if len(ses) != 1 || !slices.Contains(made, ses[0].SecretAccessKey) || !slices.Contains(made, ses[0].SessionToken) {
			t.Errorf("call %d: the session's secret and token are not among the values to mask", i)
		}
	}
	if n := c.Bedrock.STS.Assumed.Load(); n != 1 {
		t.Errorf("AssumeRole was called %d times for 3 calls, want 1", n)
	}
	ses := c.Bedrock.STS.Minted()[0]
	for _, s := range c.Recorder.Seen() {
		if s.Path == "/" {
			continue
		}
		if !strings.Contains(s.Header.Get("Authorization"), "Credential="+ses.AccessKeyID+"/") || s.Header.Get("X-Amz-Security-Token") != ses.SessionToken {
			t.Errorf("%s was not signed with the role's session", s.Path)
		}
	}
	if n := c.Refused(); n != 0 {
		t.Errorf("the stand-in refused %d calls", n)
	}
}

// TestBedrock_RoleSessionRefreshedBeforeExpiry: a session within
// RoleRefreshWindow of its expiry is used for ReusedFor, then the role is
// assumed anew.
func TestBedrock_RoleSessionRefreshedBeforeExpiry(t *testing.T) {
	c := cloudtest.New(t, "bedrock", nil)
	c.Bedrock.STS.TTL = cloud.RoleRefreshWindow - time.Minute
	_, sealed := c.RoleCredential(t, "", nil)
	cl, _ := client(c)
	clock := clocktest.New(time.Now())
	cl.Now = clock.Now
	for i := 0; i < 3; i++ {
		if status, body, _ := roleCall(t, cl, sealed); status != 200 {
			t.Fatalf("call %d: %d %s", i, status, body)
		}
	}
	if n := c.Bedrock.STS.Assumed.Load(); n != 1 {
		t.Errorf("AssumeRole was called %d times for 3 calls within ReusedFor, want 1", n)
	}
	clock.Advance(cloud.ReusedFor)
	if status, body, _ := roleCall(t, cl, sealed); status != 200 {
		t.Fatalf("call ReusedFor later: %d %s", status, body)
	}
	if n := c.Bedrock.STS.Assumed.Load(); n != 2 {
		t.Errorf("AssumeRole was called %d times, ReusedFor later on a session near expiry, want 2", n)
	}
	if n := c.Refused(); n != 0 {
		t.Errorf("the stand-in refused %d calls", n)
	}
}

// TestBedrock_ExpiredRoleSessionIsAssumedAnew: a session Bedrock says
// is expired before its time is a 403 for that call, and the next call
// assumes the role anew.
func TestBedrock_ExpiredRoleSessionIsAssumedAnew(t *testing.T) {
	c := cloudtest.New(t, "bedrock", nil)
	_, sealed := c.RoleCredential(t, "", nil)
	cl, _ := client(c)
	if status, body, _ := roleCall(t, cl, sealed); status != 200 {
		t.Fatalf("first call: %d %s", status, body)
	}
	c.Bedrock.STS.Expire()
	if status, body, _ := roleCall(t, cl, sealed); status != 403 || !strings.Contains(body, "ExpiredTokenException") {
		t.Errorf("call on the expired session = %d %s, want a 403 naming ExpiredTokenException", status, body)
	}
	if status, body, _ := roleCall(t, cl, sealed); status != 200 {
		t.Errorf("call after = %d %s, want 200 on a new session", status, body)
	}
	if n := c.Bedrock.STS.Assumed.Load(); n != 2 {
		t.Errorf("AssumeRole was called %d times, want 2", n)
	}
}

// TestVertex_TokenWithNoExpiryIsNotKeptForever is the attack of a
// service account's token_uri answering an access token with an
// expires_in of 0 or less, which golang.org/x/oauth2 reads as a token
// that never expires: the broker would send it on every call for as long
// as it runs, whatever became of it. It is taken as expired already: used
// for ReusedFor, then fetched anew.
func TestVertex_TokenWithNoExpiryIsNotKeptForever(t *testing.T) {
	for _, expiresIn := range []int{0, -60} {
		t.Run(fmt.Sprintf("expires_in %d", expiresIn), func(t *testing.T) {
			c := cloudtest.New(t, "vertex", nil)
			c.Vertex.ExpiresIn = new(expiresIn)
			cl, _ := client(c)
			clock := clocktest.New(time.Now())
			cl.Now = clock.Now
			for i := range 3 {
				if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil); status != 200 {
					t.Fatalf("call %d: %d %s", i, status, body)
				}
			}
			if n := c.Vertex.Minted.Load(); n != 1 {
				t.Errorf("the token endpoint was asked %d times for 3 calls within ReusedFor, want 1", n)
			}
			clock.Advance(cloud.ReusedFor)
			if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil); status != 200 {
				t.Fatalf("call ReusedFor later: %d %s", status, body)
			}
			if n := c.Vertex.Minted.Load(); n != 2 {
				t.Errorf("the token endpoint was asked %d times, ReusedFor later, want 2: the token was kept as though it never expired", n)
			}
		})
	}
}

// TestVertex_TokenRefused401IsDropped is the weakness of an access token
// Vertex AI no longer takes (revoked, or expired before its time by a
// clock apart): every later call would carry it, and be refused, until
// it expired by the broker's clock, an hour on. A 401 drops it: that call
// is a 403 and the next fetches a new token; but one token at most is
// fetched each ReusedFor, however many calls are refused, so a token
// Google refuses at once does not make every call a request to it.
func TestVertex_TokenRefused401IsDropped(t *testing.T) {
	c := cloudtest.New(t, "vertex", nil)
	cl, _ := client(c)
	clock := clocktest.New(time.Now())
	cl.Now = clock.Now
	call := func() (int, string) {
		status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil)
		return status, body
	}
	if status, body := call(); status != 200 {
		t.Fatalf("first call: %d %s", status, body)
	}
	c.Vertex.Revoke()
	if status, body := call(); status != 403 || !strings.Contains(body, "UNAUTHENTICATED") {
		t.Errorf("call on the revoked token = %d %s, want a 403 naming UNAUTHENTICATED", status, body)
	}
	if status, body := call(); status != 200 {
		t.Errorf("call after = %d %s, want 200 with a new token", status, body)
	}
	if n := c.Vertex.Minted.Load(); n != 2 {
		t.Errorf("the token endpoint was asked %d times, want 2", n)
	}
	c.Vertex.Revoke()
	for i := range 20 {
		if status, body := call(); status != 403 {
			t.Fatalf("call %d on a token revoked within ReusedFor of the last drop = %d %s, want 403", i, status, body)
		}
	}
	if n := c.Vertex.Minted.Load(); n != 2 {
		t.Errorf("the token endpoint was asked %d times for 20 calls refused within ReusedFor of the last drop, want 2", n)
	}
	clock.Advance(cloud.ReusedFor)
	if status, body := call(); status != 403 {
		t.Errorf("call ReusedFor later = %d %s, want the 403 that drops the token", status, body)
	}
	if status, body := call(); status != 200 {
		t.Errorf("call after = %d %s, want 200 with a new token", status, body)
	}
	if n := c.Vertex.Minted.Load(); n != 3 {
		t.Errorf("the token endpoint was asked %d times, ReusedFor later, want 3", n)
	}
}

// TestBedrock_RoleRefusedIsA403: STS refusing the role (AccessDenied, a
// wrong external id) is a 403 permission_error naming STS's code, and
// echoes no key; Bedrock is not called.
func TestBedrock_RoleRefusedIsA403(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(c *cloudtest.Cloud, sealed string) string
	}{
		{"denied", func(c *cloudtest.Cloud, sealed string) string { c.Bedrock.STS.Deny.Store(true); return sealed }},
		{"wrong external id", func(c *cloudtest.Cloud, sealed string) string {
			c.Bedrock.STS.ExternalID = "another-one"
			return sealed
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cloudtest.New(t, "bedrock", nil)
			_, sealed := c.RoleCredential(t, "ext-standin-1", nil)
			sealed = tt.mod(c, sealed)
			cl, _ := client(c)
			status, body, made := roleCall(t, cl, sealed)
			if status != 403 || !strings.Contains(body, `"permission_error"`) || !strings.Contains(body, "AccessDenied") || !strings.Contains(body, "role_arn") {
				t.Errorf("= %d %s, want a 403 permission_error naming AccessDenied", status, body)
			}
			for _, s := range append(c.Secrets, cloudtest.StandInRoleARN, "ext-standin-1") {
				if strings.Contains(body, s) {
					t.Errorf("the answer echoes %q", s)
				}
			}
			for _, s := range c.Recorder.Seen() {
				if s.Path != "/" {
					t.Errorf("Bedrock was called (%s) though the role was refused", s.Path)
				}
			}
			if len(made) != 0 {
				t.Errorf("values made: %d, want none", len(made))
			}
		})
	}
}

// TestBedrock_RoleDefaultsToTheRegionalSTSEndpoint: without
// sts_endpoint, AssumeRole goes to the credential's region's STS
// endpoint, through the Client's transport.
func TestBedrock_RoleDefaultsToTheRegionalSTSEndpoint(t *testing.T) {
	raw := `{"region":"eu-west-3","access_key_id":"AKIAIOSFODNN7EXAMPLE","secret_access_key":"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY","role_arn":"arn:aws:iam::123456789012:role/r"}`
	sealed, err := cloud.Check("bedrock", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	cred, _ := cloud.Parse(sealed)
	var hosts []string
	cl := &cloud.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		hosts = append(hosts, r.URL.Scheme+"://"+r.URL.Host+r.URL.Path)
		return nil, errors.New("no network in this test")
	})}
	_, err = cl.Do(context.Background(), cred, cloud.Call{Method: "POST", Path: cloud.PathMessages, Body: []byte(message("claude-sonnet-4-5", false))}, func(string) {})
	if err == nil || strings.Contains(err.Error(), "EXAMPLEKEY") {
		t.Errorf("Do = %v, want an error saying STS did not answer", err)
	}
	if len(hosts) != 1 || hosts[0] != "https://sts.eu-west-3.amazonaws.com/" {
		t.Errorf("requests went to %q, want one to https://sts.eu-west-3.amazonaws.com/", hosts)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCloud_SendsTheBetasAsked: each cloud is sent the betas the call
// asks for in its header and in its body's anthropic_beta, named so in
// any case (cloud.Asked, what the spend meter prices), each once, and
// no member naming anthropic_beta in another case reaches it.
func TestCloud_SendsTheBetasAsked(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":5,"anthropic_beta":["context-1m-2025-08-07"],` +
		`"Anthropic_Beta":["effort-2025-11-24","interleaved-thinking-2025-05-14"],"messages":[{"role":"user","content":"hi"}]}`
	want := []string{"interleaved-thinking-2025-05-14", "effort-2025-11-24", "context-1m-2025-08-07"}
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			c := cloudtest.New(t, kind, nil)
			cl, _ := client(c)
			if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, body, []string{"interleaved-thinking-2025-05-14"}); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			got := sentBetas(t, kind, c.Recorder.Seen())
			if len(got) != 1 || len(got[0]) != len(want) {
				t.Fatalf("the cloud was sent betas %q, want %q", got, want)
			}
			for _, b := range want {
				if !slices.Contains(got[0], b) {
					t.Errorf("the cloud was sent betas %q, want %q", got[0], want)
				}
			}
			for _, s := range c.Recorder.Seen() {
				if strings.Contains(strings.ToLower(string(s.Body)), `"anthropic_beta"`) && kind == "vertex" || strings.Contains(string(s.Body), "Anthropic_Beta") {
					t.Errorf("the cloud was sent a body naming anthropic_beta apart from the betas sent: %s", s.Body)
				}
			}
		})
	}
}

// TestCloud_BoxChosenKeyNameNeverStripsOthersBetas is the attack on a
// broker that takes any 400 naming anthropic_beta beside "invalid" for a
// beta refusal: a box sends its neighbours' betas with an extra member
// named anthropic_beta_invalid, which Bedrock's schema check refuses,
// repeating the name. Remembered as a refusal of those betas, it made
// every other box's calls sending them go without, until restart. The
// box gets its 400; the others keep their betas.
func TestCloud_BoxChosenKeyNameNeverStripsOthersBetas(t *testing.T) {
	c := cloudtest.New(t, "bedrock", nil)
	c.Bedrock.Members = []string{"anthropic_version", "anthropic_beta", "max_tokens", "messages", "system", "tools"}
	cl, log := client(c)
	betas := []string{"interleaved-thinking-2025-05-14,context-1m-2025-08-07"}
	hostile := `{"model":"claude-sonnet-4-5","max_tokens":5,"anthropic_beta_invalid":true,"messages":[{"role":"user","content":"hi"}]}`
	for range 2 {
		status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, hostile, betas)
		if status != 400 || !strings.Contains(body, "extraneous key") {
			t.Fatalf("the hostile call = %d %s, want Bedrock's 400", status, body)
		}
	}
	n := len(c.Recorder.Seen())
	if status, body, _ := do(t, cl, c.Sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), betas); status != 200 {
		t.Fatalf("another box's call = %d %s", status, body)
	}
	got := sentBetas(t, "bedrock", c.Recorder.Seen()[n:])
	want := []string{"interleaved-thinking-2025-05-14", "context-1m-2025-08-07"}
	if len(got) != 1 || !slices.Equal(got[0], want) {
		t.Errorf("another box's call sent %q, want its betas %q: a member name the box chose took them away", got, want)
	}
	if l := log.String(); l != "" {
		t.Errorf("the log says %q, want nothing remembered", l)
	}
}

// roundTrip is an http.RoundTripper of a func.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCloud_RefusalRepeatedWithoutBetasIsNotRemembered: a cloud whose
// 400 reads as a refusal of the betas sent (it repeats text the box
// wrote, say) but which refuses the call made without them too was not
// refusing the betas: nothing is remembered, and the next call with
// those betas sends them.
func TestCloud_RefusalRepeatedWithoutBetasIsNotRemembered(t *testing.T) {
	const beta = "context-1m-2025-08-07"
	var bodies []string
	cl := &cloud.Client{Log: slog.New(slog.DiscardHandler), Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		msg, _ := json.Marshal(map[string]string{"message": "Unexpected value(s) `" + beta + "` for the `anthropic-beta` header."})
		return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(string(msg))), Request: r}, nil
	})}
	const cred = `{"kind":"bedrock","region":"us-east-1","access_key_id":"AKIASTANDIN000000009","secret_access_key":"s3cret","endpoint":"https://bedrock.invalid"}`
	for i := range 2 {
		status, body, _ := do(t, cl, cred, cloud.PathMessages, message("claude-sonnet-4-5", false), []string{beta})
		if status != 400 {
			t.Fatalf("call %d = %d %s, want the cloud's 400", i, status, body)
		}
	}
	// Each call: once with the beta, once again without.
	if len(bodies) != 4 || !strings.Contains(bodies[2], beta) || strings.Contains(bodies[3], beta) {
		t.Errorf("the cloud got %q, want each call with the beta and then without: the second call lost it", bodies)
	}
}

// TestCloud_RefusedAccountIsNotAskedOnEveryCall is the attack of a box
// on a cloud account whose key is refused (a role STS will not let it
// assume, a service account Google's token endpoint refuses) or whose
// token endpoint fails: the box calls as fast as it can, and each call
// would have the broker ask STS or Google again, with the operator's
// key, spending a quota the operator's other uses of the account share
// (STS throttles by account). A refused or failed fetch is given again
// for a while without asking.
func TestCloud_RefusedAccountIsNotAskedOnEveryCall(t *testing.T) {
	for _, tt := range []struct {
		name   string
		kind   string
		status int // the box's
	}{
		{"bedrock role refused", "bedrock", http.StatusForbidden},
		{"vertex key refused", "vertex", http.StatusForbidden},
		{"vertex token endpoint failing", "vertex", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cloudtest.New(t, tt.kind, nil)
			sealed := c.Sealed
			var asked atomic.Int64
			if tt.kind == "bedrock" {
				_, sealed = c.RoleCredential(t, "", nil)
				c.Bedrock.STS.Deny.Store(true)
			}
			standIn := c.Recorder.Handler
			c.Recorder.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/" || r.URL.Path == "/token":
					asked.Add(1)
				}
				switch {
				case r.URL.Path == "/token" && tt.status != 0:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
				case r.URL.Path == "/token":
					http.Error(w, "backend error", http.StatusInternalServerError)
				default:
					standIn.ServeHTTP(w, r)
				}
			})
			clock := clocktest.New(time.Now())
			cl, _ := client(c)
			cl.Now = clock.Now
			cred, err := cloud.Parse([]byte(sealed))
			if err != nil {
				t.Fatal(err)
			}
			call := func() int {
				resp, err := cl.Do(context.Background(), cred, cloud.Call{Method: "POST", Path: cloud.PathMessages, Body: []byte(message("claude-sonnet-4-5", false))}, func(string) {})
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			for i := range 20 {
				if got := call(); got != tt.status {
					t.Fatalf("call %d = %d, want %d", i, got, tt.status)
				}
			}
			if n := asked.Load(); n != 1 {
				t.Errorf("the key was sent to be refused %d times for 20 calls, want 1", n)
			}
			clock.Advance(cloud.FailedFor)
			call()
			if n := asked.Load(); n != 2 {
				t.Errorf("the key was sent %d times, FailedFor later, want 2", n)
			}
		})
	}
}

// TestCloud_ShortLivedTokensDoNotStormTheEndpoint is the attack of a
// hostile or broken token endpoint (a service account's token_uri, a
// credential's sts_endpoint) giving access tokens or sessions that
// expire at once, or within the margin a new one is fetched before (a
// tiny expires_in, a session of a minute, one already expired): each of
// a box's calls would ask it again, a token storm against the endpoint
// and a slow call each time. A token or session is used for ReusedFor at
// least, whatever expiry it came with, and Bedrock's ExpiredToken drops
// a session at most once each ReusedFor.
func TestCloud_ShortLivedTokensDoNotStormTheEndpoint(t *testing.T) {
	tests := []struct {
		name   string
		kind   string
		life   time.Duration // the token's or session's
		status int           // the box's
		asks   int64         // of the endpoint, for 20 calls within ReusedFor
	}{
		{"vertex token of a second", "vertex", time.Second, http.StatusOK, 1},
		{"bedrock session within the refresh window", "bedrock", time.Minute, http.StatusOK, 1},
		// Bedrock refuses the expired session (ExpiredToken), which drops
		// it once: the second call assumes the role again, the rest wait.
		{"bedrock session already expired", "bedrock", -time.Minute, http.StatusForbidden, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cloudtest.New(t, tt.kind, nil)
			sealed := c.Sealed
			asks := func() int64 { return c.Vertex.Minted.Load() }
			if tt.kind == "bedrock" {
				c.Bedrock.STS.TTL = tt.life
				_, sealed = c.RoleCredential(t, "", nil)
				asks = c.Bedrock.STS.Assumed.Load
			} else {
				c.Vertex.ExpiresIn = new(int(tt.life / time.Second))
			}
			cl, _ := client(c)
			clock := clocktest.New(time.Now())
			cl.Now = clock.Now
			for i := range 20 {
				if status, body, _ := do(t, cl, sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil); status != tt.status {
					t.Fatalf("call %d = %d %s, want %d", i, status, body, tt.status)
				}
			}
			if n := asks(); n != tt.asks {
				t.Errorf("the endpoint was asked %d times for 20 calls, want %d", n, tt.asks)
			}
			clock.Advance(cloud.ReusedFor)
			do(t, cl, sealed, cloud.PathMessages, message("claude-sonnet-4-5", false), nil)
			if n := asks(); n != tt.asks+1 {
				t.Errorf("the endpoint was asked %d times, ReusedFor later, want %d", n, tt.asks+1)
			}
		})
	}
}

// TestCloud_EndlessTokenEndpointAnswerIsNotReadWhole is the attack of a
// hostile or broken token endpoint (a credential's sts_endpoint, a
// service account's token_uri) answering a body without end: the AWS
// SDK reads STS's answer whole before it decodes it, so the broker would
// hold as much as the endpoint sends within the fetch's 30 seconds,
// gigabytes on a fast link. An answer of a token endpoint is read to
// maxTokenAnswer at most; past it, the call is answered as for an
// endpoint that did not answer.
func TestCloud_EndlessTokenEndpointAnswerIsNotReadWhole(t *testing.T) {
	const sent = 64 << 20 // what the endpoint sends, at most
	for _, tt := range []struct{ kind, path, contentType string }{
		{"bedrock", "/", "text/xml"},
		{"vertex", "/token", "application/json"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			c := cloudtest.New(t, tt.kind, nil)
			sealed := c.Sealed
			if tt.kind == "bedrock" {
				_, sealed = c.RoleCredential(t, "", nil)
			}
			var written atomic.Int64
			standIn := c.Recorder.Handler
			c.Recorder.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != tt.path {
					standIn.ServeHTTP(w, r)
					return
				}
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(http.StatusOK)
				chunk := []byte(`<AssumeRoleResponse><AssumeRoleResult><Credentials><SessionToken>`)
				if tt.kind == "vertex" {
					chunk = []byte(`{"access_token":"`)
				}
				fill := []byte(strings.Repeat("A", 32<<10))
				for written.Load() < sent {
					n, err := w.Write(chunk)
					written.Add(int64(n))
					if err != nil {
						return
					}
					chunk = fill
				}
			})
			cl, _ := client(c)
			cred, err := cloud.Parse([]byte(sealed))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cl.Do(context.Background(), cred, cloud.Call{Method: "POST", Path: cloud.PathMessages, Body: []byte(message("claude-sonnet-4-5", false))}, func(string) {})
			if err == nil {
				resp.Body.Close()
				t.Errorf("Do = %d, want the error of a token endpoint that did not answer", resp.StatusCode)
			}
			if n := written.Load(); n >= sent/2 {
				t.Errorf("the token endpoint wrote %d bytes of its answer before the broker let go, want far fewer than %d", n, sent)
			}
			for _, s := range c.Recorder.Seen() {
				if s.Path != tt.path {
					t.Errorf("the cloud was called (%s) with no token", s.Path)
				}
			}
		})
	}
}
