package inference_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/cloud/cloudtest"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/server"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// checkCloud returns the form of a cloud credential sealed (cloud.Check).
func checkCloud(t *testing.T, kind, raw string) string {
	t.Helper()
	v, err := cloud.Check(kind, []byte(raw))
	if err != nil {
		t.Fatalf("cloud.Check(%s): %v", kind, err)
	}
	return string(v)
}

// sdkClient is the Go SDK as a box has it: the broker's base URL, the
// box's token as its key, nothing from the environment.
func sdkClient(env *cloudEnv) anthropic.Client {
	return anthropic.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(env.b.URL+protocol.PrefixAnthropic+"/"),
		option.WithAPIKey(env.token),
		option.WithHTTPClient(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}),
		option.WithMaxRetries(0),
	)
}

func hello() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hi through the cloud"))},
	}
}

// TestCloud_GoSDKUnchanged runs the Go SDK, as a box has it, through a
// broker paying with each cloud kind, streaming and not.
func TestCloud_GoSDKUnchanged(t *testing.T) {
	tests := []struct {
		kind, want, model string
	}{
		{"bedrock", "Hello from Bedrock.", "anthropic.claude-sonnet-4-5-20250929-v1:0"},
		{"vertex", "Hello from Vertex.", "claude-sonnet-4-5@20250929"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			env := newCloudBroker(t, tt.kind)
			c := sdkClient(env)
			msg, err := c.Messages.New(context.Background(), hello())
			if err != nil {
				t.Fatalf("Messages.New: %v", err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != tt.want || msg.Usage.InputTokens != 12 || msg.Usage.OutputTokens != 6 {
				t.Errorf("Messages.New = %+v, want %q with usage 12/6", msg, tt.want)
			}
			if string(msg.Model) != tt.model {
				t.Errorf("the cloud was asked for model %q, want %q", msg.Model, tt.model)
			}

			stream := c.Messages.NewStreaming(context.Background(), hello())
			var acc anthropic.Message
			var types []string
			for stream.Next() {
				ev := stream.Current()
				types = append(types, ev.Type)
				if err := acc.Accumulate(ev); err != nil {
					t.Fatalf("Accumulate: %v", err)
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("stream: %v", err)
			}
			// The SDK passes no ping on; the box's bytes hold it
			// (TestCloud_StreamIsAnthropicSSE).
			want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
			if got := strings.Join(types, " "); got != want {
				t.Errorf("stream events = %s, want %s", got, want)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != tt.want || acc.Usage.OutputTokens != 6 {
				t.Errorf("streamed message = %+v, want %q", acc, tt.want)
			}
			if env.bedrock != nil && env.bedrock.Bad.Load() != 0 {
				t.Errorf("the Bedrock stand-in refused %d requests", env.bedrock.Bad.Load())
			}
		})
	}
}

// TestCloud_StreamIsAnthropicSSE checks the bytes the box reads: the
// Anthropic event stream, each event whole, as text/event-stream.
func TestCloud_StreamIsAnthropicSSE(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
				[]byte(`{"model":"claude-haiku-4-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`), nil)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Body)
			}
			events := strings.Split(strings.TrimSuffix(string(resp.Body), "\n\n"), "\n\n")
			if len(events) != 7 || !strings.HasPrefix(events[0], "event: message_start\ndata: {") || events[6] != `event: message_stop`+"\n"+`data: {"type":"message_stop"}` {
				t.Errorf("the box read:\n%s", resp.Body)
			}
		})
	}
}

// TestBedrock_BoxTokenNeverReachesAWS: the box's token, wherever the box
// writes it, reaches Bedrock nowhere; what Bedrock gets is signed with
// the operator's key alone.
func TestBedrock_BoxTokenNeverReachesAWS(t *testing.T) {
	testTokenNeverReachesCloud(t, "bedrock")
}

// TestVertex_BoxTokenNeverReachesGoogle is the same for Vertex AI and
// Google's token endpoint.
func TestVertex_BoxTokenNeverReachesGoogle(t *testing.T) {
	testTokenNeverReachesCloud(t, "vertex")
}

func testTokenNeverReachesCloud(t *testing.T, kind string) {
	env := newCloudBroker(t, kind)
	body := `{"model":"claude-sonnet-4-5","max_tokens":5,"system":"` + env.token + `","messages":[{"role":"user","content":"` + jsonEscape(env.token) + `"}]}`
	h := http.Header{"X-Api-Key": {env.token}, "Anthropic-Beta": {"b-" + env.token}, "X-Stainless-Token": {env.token}}
	for _, stream := range []string{"", `"stream":true,`} {
		b := strings.Replace(body, `{"model"`, "{"+stream+`"model"`, 1)
		resp := env.b.Do("POST", "/llm/anthropic/v1/messages?k="+env.token, "", []byte(b), h)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
	}
	if n := len(env.b.Upstream.Seen()); n != 0 {
		t.Errorf("the Anthropic API got %d calls paid with a cloud account, want none", n)
	}
	seen := env.rec.Seen()
	if len(seen) < 2 {
		t.Fatalf("the stand-in saw %d requests, want 2 or more", len(seen))
	}
	for _, s := range seen {
		if where := reaches(s, env.token); len(where) > 0 {
			t.Errorf("%s %s: the box's token reached the cloud in %v", s.Method, s.Path, where)
		}
		if s.Header.Get("X-Api-Key") != "" {
			t.Errorf("%s %s: the cloud got an x-api-key", s.Method, s.Path)
		}
		if s.Path != "/token" && !strings.HasPrefix(s.Header.Get("Authorization"), map[string]string{"bedrock": "AWS4-HMAC-SHA256 ", "vertex": "Bearer ya29.standin-"}[kind]) {
			t.Errorf("%s %s: Authorization is not the broker's own", s.Method, s.Path)
		}
	}
	if env.bedrock != nil && env.bedrock.Bad.Load() != 0 {
		t.Errorf("the Bedrock stand-in refused %d requests", env.bedrock.Bad.Load())
	}
}

// TestBedrock_SignatureNeverReachesTheBox: a Bedrock that repeats the
// request's Authorization (signature, access key id) in its answer has
// them masked before the box reads it, streamed or not.
func TestBedrock_SignatureNeverReachesTheBox(t *testing.T) {
	env := newCloudBroker(t, "bedrock")
	echo := "echo " + env.secrets[1] + " " + strings.ReplaceAll(env.secrets[1], "/", `\/`)
	env.bedrock.Echo.Store(&echo)
	checkNothingReachesTheBox(t, env, []string{"Signature=", env.secrets[0], env.secrets[1]})
}

// TestVertex_TokenNeverReachesTheBox: a Vertex AI that repeats the access
// token, the key's id or a line of its private key in its answer has
// them masked before the box reads it.
func TestVertex_TokenNeverReachesTheBox(t *testing.T) {
	env := newCloudBroker(t, "vertex")
	echo := "echo " + env.secrets[0] + " " + env.secrets[1]
	env.vertex.Echo.Store(&echo)
	checkNothingReachesTheBox(t, env, []string{"ya29.standin-", env.secrets[0], env.secrets[1]})
}

func checkNothingReachesTheBox(t *testing.T, env *cloudEnv, secrets []string) {
	t.Helper()
	for _, stream := range []string{"false", "true"} {
		resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
			[]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`), nil)
		if resp.StatusCode != 200 || !strings.Contains(string(resp.Body), "echo ") {
			t.Fatalf("stream %s: status %d: %s", stream, resp.StatusCode, resp.Body)
		}
		var all strings.Builder
		_ = resp.Header.Write(&all)
		all.Write(resp.Body)
		for _, s := range secrets {
			if strings.Contains(all.String(), s) {
				t.Errorf("stream %s: the box read %q in the answer:\n%s", stream, s, all.String())
			}
		}
	}
}

// TestCloud_Refusals: what a cloud has no equivalent of is a 4xx naming
// the payer's kind, never a 5xx; the cloud's throttling and overload
// come to the box as the Anthropic API's 429 and 529.
func TestCloud_Refusals(t *testing.T) {
	type call struct {
		method, path, body string
		status             int
		typ, says          string
	}
	msg := func(model string) string {
		return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	}
	tests := []struct {
		kind  string
		calls []call
	}{
		{"bedrock", []call{
			{"GET", "/v1/models", "", 400, "invalid_request_error", "paid through Amazon Bedrock"},
			{"GET", "/v1/models/claude-sonnet-4-5", "", 400, "invalid_request_error", "paid through Amazon Bedrock"},
			{"POST", "/v1/messages", msg("claude-throttle"), 429, "rate_limit_error", "ThrottlingException"},
			{"POST", "/v1/messages", msg("claude-busy"), 529, "overloaded_error", "ServiceUnavailableException"},
			{"POST", "/v1/messages", msg("gpt-4"), 400, "invalid_request_error", "no Amazon Bedrock model id"},
		}},
		{"vertex", []call{
			{"GET", "/v1/models", "", 400, "invalid_request_error", "paid through Google Vertex AI"},
			{"POST", "/v1/messages", msg("claude-exhausted"), 429, "rate_limit_error", "RESOURCE_EXHAUSTED"},
			{"POST", "/v1/messages", msg("gpt-4"), 400, "invalid_request_error", "no Google Vertex AI model id"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			env := newCloudBroker(t, tt.kind)
			for _, c := range tt.calls {
				var body []byte
				if c.body != "" {
					body = []byte(c.body)
				}
				resp := env.b.Do(c.method, "/llm/anthropic"+c.path, env.token, body, nil)
				var e struct {
					Type  string
					Error struct{ Type, Message string }
				}
				_ = json.Unmarshal(resp.Body, &e)
				if resp.StatusCode != c.status || e.Type != "error" || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.says) {
					t.Errorf("%s %s (%s) = %d %s, want %d %s saying %q", c.method, c.path, c.body, resp.StatusCode, resp.Body, c.status, c.typ, c.says)
				}
			}
		})
	}
}

// TestCloud_CountTokens is answered through Bedrock's CountTokens and
// Vertex AI's count-tokens.
func TestCloud_CountTokens(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			c := sdkClient(env)
			n, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{
				Model:    "claude-sonnet-4-5",
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))},
			})
			if err != nil || n.InputTokens != 12 {
				t.Fatalf("CountTokens = %v, %v; want 12", n, err)
			}
			if env.bedrock != nil && env.bedrock.Bad.Load() != 0 {
				t.Errorf("the Bedrock stand-in refused %d requests", env.bedrock.Bad.Load())
			}
		})
	}
}

// TestVertex_OneTokenForManyCalls: the access token is minted once and
// kept, however many calls run at once.
func TestVertex_OneTokenForManyCalls(t *testing.T) {
	env := newCloudBroker(t, "vertex")
	c := sdkClient(env)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Messages.New(context.Background(), hello())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Messages.New: %v", err)
		}
	}
	if n := env.vertex.Minted.Load(); n != 1 {
		t.Errorf("the token endpoint minted %d tokens for 8 calls, want 1", n)
	}
}

// TestCloud_SpendReadFromTheTranslatedAnswer: the spend meter reads the
// usage of a cloud's answers, streamed and not, as it reads the
// Anthropic API's.
func TestCloud_SpendReadFromTheTranslatedAnswer(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			for _, stream := range []string{"false", "true"} {
				resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
					[]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`), nil)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				us, err := env.b.Server.Store.ListUsage(context.Background(), "a", spend.Month(time.Now()))
				if err != nil {
					t.Fatal(err)
				}
				var calls, in, out, unmeasured int64
				for _, u := range us {
					calls, in, out, unmeasured = calls+u.Calls, in+u.InputTokens, out+u.OutputTokens, unmeasured+u.Unmeasured
				}
				if calls >= 2 {
					if calls != 2 || in != 24 || out != 12 || unmeasured != 0 {
						t.Errorf("usage = %+v, want 2 calls, 24 tokens in, 12 out, none unmeasured", us)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("usage = %+v, never 2 calls", us)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestBedrock_RefusedSignatureIsA403: a key Bedrock does not take (the
// stand-in checks the signature with another secret) comes to the box as
// a 403 permission_error, which the pool fails over on.
func TestBedrock_RefusedSignatureIsA403(t *testing.T) {
	env := newCloudBroker(t, "bedrock")
	env.bedrock.Creds.SecretAccessKey = "not-the-operators-secret"
	resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`), nil)
	if resp.StatusCode != 403 || !strings.Contains(string(resp.Body), `"permission_error"`) || !strings.Contains(string(resp.Body), "InvalidSignatureException") {
		t.Errorf("status %d %s, want 403 permission_error", resp.StatusCode, resp.Body)
	}
}

// TestCloud_PoolFailsOverFromBedrockToAnthropic: a pool may mix a cloud
// account and an Anthropic key; Bedrock's throttling is the pool's 429,
// and the call is made again on the Anthropic entry, with its key, the
// box none the wiser.
func TestCloud_PoolFailsOverFromBedrockToAnthropic(t *testing.T) {
	env := newCloudBroker(t, "bedrock")
	const key = "sk-ant-api03-POOL-MIXED-ENTRY"
	sealed, err := env.b.Server.Keyring.Seal([]byte(key), pool.AD("anthro"))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.b.Server.Store.SetPoolEntry(context.Background(), store.PoolEntry{Name: "anthro", Weight: 1, Sealed: sealed, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	env.b.Server.Cache.Drop(store.ChangePool, "anthro")
	for i := range 8 {
		name := fmt.Sprintf("mix-%d", i)
		tok := env.b.AddBox(name)
		env.b.Report(tok, brokertest.Entry("inference", "agent"))
		resp := env.b.Do("POST", "/llm/anthropic/v1/messages", tok, []byte(`{"model":"claude-throttle","max_tokens":5,"messages":[]}`), nil)
		if resp.StatusCode != 200 || !strings.Contains(string(resp.Body), "Hello from the stand-in.") {
			t.Fatalf("box %s: status %d %s, want the Anthropic entry's answer", name, resp.StatusCode, resp.Body)
		}
	}
	if len(env.rec.Seen()) == 0 {
		t.Fatal("no box's call went to Bedrock first: the failover was not exercised")
	}
	for _, s := range env.b.Upstream.Seen() {
		if s.Header.Get("X-Api-Key") != key {
			t.Errorf("the Anthropic entry's call carried x-api-key of %d bytes, want its key", len(s.Header.Get("X-Api-Key")))
		}
	}
	for _, s := range env.rec.Seen() {
		if strings.Contains(s.Header.Get("X-Api-Key")+string(s.Body), key) {
			t.Error("the Anthropic key reached Bedrock")
		}
	}
}

// TestCloud_StreamPassesEventByEvent: the box reads the stream's first
// event while the cloud holds back the rest: nothing is buffered.
func TestCloud_StreamPassesEventByEvent(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			hold := make(chan struct{})
			if env.bedrock != nil {
				env.bedrock.Hold = hold
			} else {
				env.vertex.Hold = hold
			}
			defer close(hold)
			req, _ := http.NewRequest("POST", env.b.URL+"/llm/anthropic/v1/messages",
				strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+env.token)
			resp, err := env.b.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make(chan string, 1)
			go func() {
				br := bufio.NewReader(resp.Body)
				var ev strings.Builder
				for !strings.HasSuffix(ev.String(), "\n\n") {
					line, err := br.ReadString('\n')
					ev.WriteString(line)
					if err != nil {
						break
					}
				}
				first <- ev.String()
			}()
			select {
			case ev := <-first:
				if !strings.HasPrefix(ev, "event: message_start\n") {
					t.Errorf("first event = %q", ev)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the first event did not reach the box while the cloud held the rest: the stream is buffered")
			}
		})
	}
}

// TestCloud_DecideIsRefusedNotSentToAnthropic: decide asks the Anthropic
// API's Messages route itself, so a box whose payer is a cloud account
// gets a 400 naming the cloud, and neither the Anthropic API nor the
// cloud receives anything, least of all the cloud account.
func TestCloud_DecideIsRefusedNotSentToAnthropic(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			env.b.Report(env.token, brokertest.Entry("inference", "agent", "decide"))
			body := `{"model":"claude-sonnet-4-5","state":{},"questions":{"q":{"type":"choice","instructions":"Pick.","criteria":{"x":"x","y":"y"}}}}`
			resp := env.b.Do("POST", protocol.RouteDecide, "", []byte(body), http.Header{"Authorization": {"Bearer " + env.token}})
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(resp.Body), cloud.Name(kind)) {
				t.Errorf("decide paid by %s = %d %s, want a 400 naming %s", kind, resp.StatusCode, resp.Body, cloud.Name(kind))
			}
			if n := len(env.b.Upstream.Seen()); n != 0 {
				t.Errorf("the Anthropic API got %d calls, want none", n)
			}
			if n := len(env.rec.Seen()); n != 0 {
				t.Errorf("the cloud got %d calls, want none", n)
			}
		})
	}
}

// newRoleBroker is newCloudBroker's Bedrock, its shared credential an
// account that signs with sessions of a role (role_arn), assumed at the
// STS stand-in.
func newRoleBroker(t *testing.T) (*cloudEnv, *cloudtest.Cloud) {
	t.Helper()
	c := cloudtest.New(t, "bedrock", nil)
	raw, sealed := c.RoleCredential(t, "ext-broker-1", nil)
	env := &cloudEnv{rec: c.Recorder, bedrock: c.Bedrock, cred: raw, secrets: c.Secrets, upstream: c.Server}
	tr := c.Transport()
	env.b = brokertest.New(t, brokertest.Options{ServerOptions: func(o *server.Options) { o.Transport = tr }})
	env.b.SetCredential("anthropic", sealed)
	env.token = env.b.AddBox("a")
	env.b.Report(env.token, brokertest.Entry("inference", "agent"))
	return env, c
}

// TestBedrock_RoleSessionThroughTheBroker: a box's calls paid with a
// role_arn account go through the Go SDK unchanged, signed with one
// session of the role; a Bedrock repeating the request's Authorization
// has the session's key id, signature, secret and token masked.
func TestBedrock_RoleSessionThroughTheBroker(t *testing.T) {
	env, c := newRoleBroker(t)
	sdk := sdkClient(env)
	for i := 0; i < 2; i++ {
		msg, err := sdk.Messages.New(context.Background(), hello())
		if err != nil {
			t.Fatalf("Messages.New: %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hello from Bedrock." {
			t.Errorf("Messages.New = %+v", msg)
		}
	}
	if n := c.Bedrock.STS.Assumed.Load(); n != 1 {
		t.Errorf("AssumeRole was called %d times for two calls, want 1", n)
	}
	ses := c.Bedrock.STS.Minted()[0]
	echo := "echo " + ses.SecretAccessKey + " " + ses.SessionToken + " " + strings.ReplaceAll(ses.SecretAccessKey, "/", `\/`)
	c.Bedrock.Echo.Store(&echo)
	checkNothingReachesTheBox(t, env, []string{"Signature=", ses.AccessKeyID, ses.SecretAccessKey, ses.SessionToken, env.secrets[0], env.secrets[1]})
	if n := c.Refused(); n != 0 {
		t.Errorf("the stand-in refused %d requests", n)
	}
}

// TestBedrock_RefusedRoleIsA403: STS refusing to assume the role comes
// to the box as a 403 permission_error (the pool fails over on it) that
// names STS's code and echoes no key.
func TestBedrock_RefusedRoleIsA403(t *testing.T) {
	env, c := newRoleBroker(t)
	c.Bedrock.STS.Deny.Store(true)
	resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token, []byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	_ = json.Unmarshal(resp.Body, &e)
	if resp.StatusCode != 403 || e.Type != "error" || e.Error.Type != "permission_error" || !strings.Contains(e.Error.Message, "AccessDenied") {
		t.Errorf("= %d %s, want a 403 permission_error naming AccessDenied", resp.StatusCode, resp.Body)
	}
	for _, s := range append(env.secrets, "ext-broker-1") {
		if strings.Contains(string(resp.Body), s) {
			t.Errorf("the answer echoes a secret: %s", resp.Body)
		}
	}
}

// TestCloud_BetasThroughTheBroker: the box's betas, as Claude Code sends
// them, reach Bedrock filtered; a model refusing every beta answers the
// box through the fallback, streamed or not, on both clouds.
func TestCloud_BetasThroughTheBroker(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			h := http.Header{"Anthropic-Beta": {"claude-code-20250219,interleaved-thinking-2025-05-14", "oauth-2025-04-20"}}
			for _, model := range []string{"claude-sonnet-4-5", "claude-nobeta"} {
				for _, stream := range []string{"false", "true"} {
					resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
						[]byte(`{"model":"`+model+`","max_tokens":5,"stream":`+stream+`,"messages":[{"role":"user","content":"hi"}]}`), h)
					if resp.StatusCode != 200 || !strings.Contains(string(resp.Body), "Hello from") {
						t.Errorf("%s stream %s: %d %s", model, stream, resp.StatusCode, resp.Body)
					}
				}
			}
			if kind != "bedrock" {
				return
			}
			for _, s := range env.rec.Seen() {
				if strings.Contains(string(s.Body), "claude-code-20250219") || strings.Contains(string(s.Body), "oauth-2025-04-20") {
					t.Errorf("%s: Bedrock was sent a beta it does not know: %s", s.Path, s.Body)
				}
			}
		})
	}
}

// TestBudget_Context1MInTheBodyOnBedrockReservesTheMillion is the attack
// on a meter that reads the 1M window only from the anthropic-beta
// header: a box held to a budget names context-1m in its body's
// anthropic_beta, which Bedrock takes, with a source the API counts by
// itself (a URL image, a PDF). Priced at the 200K window, it was
// admitted by a budget a million tokens' input passes. The call is
// priced at the 1M window, and refused by such a budget before it
// reaches Bedrock; without the beta, the same budget admits it.
func TestBudget_Context1MInTheBodyOnBedrockReservesTheMillion(t *testing.T) {
	env := newCloudBroker(t, "bedrock")
	meter := env.b.Server.Meter
	full := meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1}, Input: 200_000, Output: 1000})
	million := meter.Bound(spend.Estimate{Estimate: capability.Estimate{Model: "claude-sonnet-4-5", Calls: 1, Context1M: true}, Input: 1_000_000, Output: 1000})
	if million <= 5*full {
		t.Fatalf("the test is wrong: the 1M bound %d is not far over the 200K bound %d", million, full)
	}
	if err := env.b.Server.Store.SetBudget(context.Background(), store.Budget{Box: "a", Limit: million - 1, UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	body := func(betas string) []byte {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":1000,` + betas + `"messages":[{"role":"user","content":[` +
			`{"type":"image","source":{"type":"url","url":"https://example.com/huge.png"}},{"type":"text","text":"What is in it?"}]}]}`)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name  string
		betas string
	}{
		{"anthropic_beta", `"anthropic_beta":["context-1m-2025-08-07"],`},
		{"Anthropic_Beta", `"Anthropic_Beta":["interleaved-thinking-2025-05-14","context-1m-2025-08-07"],`},
	}
	for _, tt := range tests {
		resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token, body(tt.betas), h)
		if _, msg := brokertest.Refusal(resp.Body); resp.StatusCode != 403 || !strings.Contains(msg, spend.FormatUSD(million)) {
			t.Errorf("context-1m in the body's %s, budget under a million tokens' bound = %d %q, want 403 naming %s",
				tt.name, resp.StatusCode, msg, spend.FormatUSD(million))
		}
	}
	if n := len(env.rec.Seen()); n != 0 {
		t.Errorf("Bedrock received %d calls, want none", n)
	}
	if resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token, body(""), h); resp.StatusCode != 200 {
		t.Errorf("no beta, same budget = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}
