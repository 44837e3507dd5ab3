package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestServe_StreamsCutAtTheGracesEndAreRecorded: a SIGTERM while two
// streams are open, one of a box with a budget (its call reserved its
// bound) and one of a box without (its settlement is batched), and the
// shutdown grace (300 ms) ends with both still open: serve closes them,
// and each call's audit entry and its charge are in the store once serve
// has returned.
func TestServe_StreamsCutAtTheGracesEndAreRecorded(t *testing.T) {
	up := heldStreams(t, "claude-haiku-4-5", false)
	dir := t.TempDir()
	tokens := map[string]string{}
	for _, box := range []string{"salad", "soup"} {
		out, _, _ := run(t, dir, "", "box", "add", box)
		tokens[box] = strings.TrimSpace(out)
	}
	run(t, dir, "sk-ant-api03-GRACE", "credential", "set", "anthropic")
	if _, errs, code := run(t, dir, "", "budget", "set", "salad", "10"); code != 0 {
		t.Fatalf("budget set = %d %q", code, errs)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := startServe(t, ctx, dir, nil, "--listen", "127.0.0.1:0", "--admin-listen", "off", "--anthropic-url", up.URL, "--shutdown-grace", "300ms")
	post := func(box, path, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[box])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s for %s = %v %v", path, box, resp, err)
		}
		return resp
	}
	for box := range tokens {
		post(box, "/api/box/declaration", `{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent"]}]}`).Body.Close()
		stream := post(box, "/llm/anthropic/v1/messages", `{"model":"claude-haiku-4-5","max_tokens":100,"messages":[],"stream":true}`)
		defer stream.Body.Close()
		if line, _ := bufio.NewReader(stream.Body).ReadString('\n'); line != "event: message_start\n" {
			t.Fatalf("%s's stream: first line %q", box, line)
		}
	}
	stop() // the SIGTERM
	if code := srv.wait(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	for box := range tokens {
		out, errs, code := run(t, dir, "", "audit", box)
		if code != 0 || !strings.Contains(out, "/llm/anthropic/v1/messages") {
			t.Errorf("audit %s after the stop = %d:\n%s%s\nwant the stream cut off", box, code, out, errs)
		}
		out, errs, code = run(t, dir, "", "spend", box)
		if code != 0 || !strings.Contains(out, "claude-haiku-4-5") {
			t.Errorf("spend %s after the stop = %d:\n%s%s\nwant the stream's call charged", box, code, out, errs)
		}
	}
}
