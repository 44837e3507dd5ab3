package inference_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/spend"
)

// TestCloud_WhatTheCallWasSignedWithIsNeverKeptAsTheModel: a cloud
// endpoint (a Vertex AI or a Bedrock VPC endpoint the credential names)
// answers with what the broker signed the call with as the model: the
// Vertex AI access token it was sent, or the Bedrock signature. The
// spend meter reads the answer's model for its usage rows, which the
// owner's page, the admin API and the log show; the box's answer is
// masked, but the meter reads beneath that. No usage row holds it.
func TestCloud_WhatTheCallWasSignedWithIsNeverKeptAsTheModel(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			standIn := env.rec.Handler
			var sent []string
			env.rec.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/token" || r.URL.Path == "/" {
					standIn.ServeHTTP(w, r)
					return
				}
				auth := r.Header.Get("Authorization")
				model := strings.TrimPrefix(auth, "Bearer ")
				if _, sig, ok := strings.Cut(auth, "Signature="); ok {
					model = sig
				}
				sent = append(sent, model)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`, model)
			})
			resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
				[]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
			}
			if len(sent) != 1 || len(sent[0]) < 20 {
				t.Fatalf("the stand-in was sent %q, want one signature or access token", sent)
			}
			if strings.Contains(string(resp.Body), sent[0]) {
				t.Errorf("the box's answer holds what the call was signed with: %s", resp.Body)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				us, err := env.b.Server.Store.ListUsage(t.Context(), "a", spend.Month(time.Now()))
				if err != nil {
					t.Fatal(err)
				}
				if len(us) > 0 {
					for _, u := range us {
						if strings.Contains(u.Model, sent[0]) || strings.Contains(u.Model, sent[0][:16]) {
							t.Errorf("a usage row keeps what the call was signed with as its model: %+v", u)
						}
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("no usage row")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestCloud_ErrorMessageCutNeverPassesPartOfASecret: a Bedrock endpoint
// refuses the call with a message that repeats the session token it
// was sent (as AWS's SignatureDoesNotMatch quotes its canonical string,
// x-amz-security-token included). The broker passes on at most 500
// bytes of a cloud's message; a session token is longer, so cut
// there it is no longer whole, and a mask that looks for the whole
// value would let its first hundreds of bytes reach the box. What the
// call was made with is masked before the message is cut.
func TestCloud_ErrorMessageCutNeverPassesPartOfASecret(t *testing.T) {
	env := newCloudBroker(t, "bedrock")
	session := "IQoJb3JpZ2luX2VjE" + strings.Repeat("Zm9vYmFy", 110) // as long as an STS session token
	var m map[string]any
	if err := json.Unmarshal([]byte(env.cred), &m); err != nil {
		t.Fatal(err)
	}
	m["session_token"] = session
	raw, _ := json.Marshal(m)
	env.b.SetCredential("anthropic", checkCloud(t, "bedrock", string(raw)))
	env.rec.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := "The request signature we calculated does not match the signature you provided.\n\nThe Canonical String for this request should have been\n'POST\n/model/x/invoke\n\nx-amz-security-token:" +
			r.Header.Get("X-Amz-Security-Token") + "\n'"
		b, _ := json.Marshal(map[string]string{"message": msg})
		w.Header().Set("X-Amzn-Errortype", "ValidationException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(b)
	})
	resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
		[]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(resp.Body), "x-amz-security-token:") {
		t.Fatalf("status %d: %s, want Bedrock's 400 with its message", resp.StatusCode, resp.Body)
	}
	if strings.Contains(string(resp.Body), session[:32]) {
		t.Errorf("the box's answer holds part of the session token: %s", resp.Body)
	}
}

// TestCloud_EncodedAnswerNeverPassesUnread: a cloud endpoint answers in
// gzip, which the broker did not ask for, repeating what it was sent.
// The cloud's answer is made anew for the box, its header the broker's
// own, so the Content-Encoding the mask would have refused was dropped
// and the compressed bytes, which no mask reads, passed on: a box that
// tries gunzip on them reads the access token or the signature. An
// answer in an encoding is refused.
func TestCloud_EncodedAnswerNeverPassesUnread(t *testing.T) {
	for _, kind := range []string{"bedrock", "vertex"} {
		t.Run(kind, func(t *testing.T) {
			env := newCloudBroker(t, kind)
			standIn := env.rec.Handler
			var sent string
			env.rec.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/token" || r.URL.Path == "/" {
					standIn.ServeHTTP(w, r)
					return
				}
				sent = r.Header.Get("Authorization")
				var buf bytes.Buffer
				zw := gzip.NewWriter(&buf)
				fmt.Fprintf(zw, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`, sent)
				zw.Close()
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Encoding", "gzip")
				_, _ = w.Write(buf.Bytes())
			})
			resp := env.b.Do("POST", "/llm/anthropic/v1/messages", env.token,
				[]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`), nil)
			body := resp.Body
			if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
				if plain, err := io.ReadAll(zr); err == nil {
					body = plain
				}
			}
			if sent == "" {
				t.Fatalf("the stand-in was not called: %d %s", resp.StatusCode, resp.Body)
			}
			if strings.Contains(string(body), sent) || strings.Contains(string(body), "Signature=") {
				t.Errorf("the box's answer, gunzipped, holds what the call was signed with: %d %.300s", resp.StatusCode, body)
			}
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d %.300s, want 502", resp.StatusCode, resp.Body)
			}
		})
	}
}
