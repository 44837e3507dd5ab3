package spend

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/inference"
)

// agentBody is a Messages request of about n bytes shaped like Claude
// Code's: a system prompt, tools with schemas, and a long conversation of
// text, tool_use and tool_result blocks (source code in them). With last,
// model and max_tokens come after the messages.
func agentBody(n int, last bool) []byte {
	code := strings.Repeat("func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif err := s.check(r); err != nil {\n\t\thttp.Error(w, \"bad \\\"request\\\"\", 400)\n\t\treturn\n\t}\n}\n", 8)
	var msgs []any
	tools := []any{}
	for i := 0; i < 12; i++ {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("Tool%d", i), "description": strings.Repeat("Runs a thing. ", 20),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "limit": map[string]any{"type": "integer"}}, "required": []string{"path"}}})
	}
	size := 0
	for i := 0; size < n-4096; i++ {
		id := fmt.Sprintf("toolu_%024d", i)
		user := map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": id, "content": code},
			map[string]any{"type": "text", "text": "Now fix the handler so that it returns 422 for a body that is not JSON."},
		}}
		asst := map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "text", "text": "I'll read the file first, then change the check."},
			map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": "/work/internal/server/server.go", "limit": 200}},
		}}
		msgs = append(msgs, user, asst)
		b, _ := json.Marshal(user)
		c, _ := json.Marshal(asst)
		size += len(b) + len(c)
	}
	rest, _ := json.Marshal(map[string]any{"system": strings.Repeat("You are Claude Code. ", 100), "tools": tools, "messages": msgs, "stream": true})
	head := `{"model":"claude-sonnet-4-5-20250929","max_tokens":32000,`
	if last {
		return []byte(string(rest[:len(rest)-1]) + `,"model":"claude-sonnet-4-5-20250929","max_tokens":32000}`)
	}
	return []byte(head + string(rest[1:]))
}

// BenchmarkFields measures reading a Messages request's model and
// max_tokens (agent-sized bodies, the fields at the start or at the end)
// and a stream event's usage.
//
//	go test -run '^$' -bench BenchmarkFields -benchmem ./internal/spend/
func BenchmarkFields(b *testing.B) {
	c := inference.New(inference.Config{})
	r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", nil)
	for _, size := range []int{200 << 10, 1 << 20} {
		for _, last := range []bool{false, true} {
			body := agentBody(size-1024, last)
			where := "start"
			if last {
				where = "end"
			}
			name := fmt.Sprintf("request-%dKiB-%s", len(body)>>10, where)
			b.Run(name+"", func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					e := c.Estimate(r, body)
					if e.Model != "claude-sonnet-4-5-20250929" || e.MaxTokens != 32000 {
						b.Fatalf("new: %+v", e)
					}
				}
			})
		}
	}
	events := map[string][]byte{
		"message_start": []byte(`{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":1520,"cache_read_input_tokens":48210,"cache_creation":{"ephemeral_5m_input_tokens":1520,"ephemeral_1h_input_tokens":0},"output_tokens":1,"service_tier":"standard"}}}`),
		"message_delta": []byte(`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":2095,"cache_creation_input_tokens":1520,"cache_read_input_tokens":48210,"output_tokens":503,"server_tool_use":{"web_search_requests":0}}}`),
	}
	for _, name := range []string{"message_start", "message_delta"} {
		data := events[name]
		b.Run("event-"+name+"", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var t Tokens
				e, ok := readEvent(data)
				if !ok {
					b.Fatal("not valid")
				}
				switch {
				case e.typ == "message_start":
					e.msg.usage.tokens(&t)
				case e.typ == "message_delta":
					e.usage.tokens(&t)
				}
				if t.CacheRead != 48210 {
					b.Fatalf("new: %+v", t)
				}
			}
		})
	}
}
