package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// agentBody is a Messages request of n bytes (n ≥ 16 KB) shaped like the
// calls a coding agent sends mid-session: a system prompt, tool
// definitions, and a conversation of turns in which the assistant reads
// files and runs commands (tool_use) and the results come back
// (tool_result), the last turn padded to make the size exact.
func agentBody(n int) []byte {
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	type message struct {
		Role    string           `json:"role"`
		Content []map[string]any `json:"content"`
	}
	type request struct {
		Model     string    `json:"model"`
		MaxTokens int       `json:"max_tokens"`
		System    string    `json:"system"`
		Tools     []tool    `json:"tools"`
		Messages  []message `json:"messages"`
	}
	schema := func(props ...string) map[string]any {
		p := map[string]any{}
		for _, name := range props {
			p[name] = map[string]any{"type": "string", "description": "The " + strings.ReplaceAll(name, "_", " ") + "."}
		}
		return map[string]any{"type": "object", "properties": p, "required": props[:1]}
	}
	req := request{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 32000,
		System: strings.Repeat("You are an interactive agent that helps users with software engineering tasks. "+
			"Use the tools available to you to read, search and change the code in the working directory. "+
			"Keep answers short; prefer editing existing files to creating new ones. ", 20),
		Tools: []tool{
			{"Read", "Reads a file from the local filesystem.", schema("file_path", "offset", "limit")},
			{"Edit", "Performs exact string replacements in files.", schema("file_path", "old_string", "new_string")},
			{"Bash", "Executes a bash command in a persistent shell session.", schema("command", "description", "timeout")},
			{"Grep", "Searches file contents with regular expressions.", schema("pattern", "path", "glob")},
			{"Glob", "Finds files by name pattern.", schema("pattern", "path")},
		},
	}
	source := func(file string, lines int) string {
		var b strings.Builder
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&b, "%6d\t", i)
			switch i % 6 {
			case 0:
				fmt.Fprintf(&b, "func handle%d(w http.ResponseWriter, r *http.Request) error {\n", i)
			case 1:
				fmt.Fprintf(&b, "\tif err := check(r.Context(), %q); err != nil {\n", file)
			case 2:
				b.WriteString("\t\treturn fmt.Errorf(\"check: %w\", err)\n")
			case 3:
				b.WriteString("\t}\n")
			case 4:
				fmt.Fprintf(&b, "\tlog.Printf(\"served %%s in %%v\", r.URL.Path, time.Since(start)) // line %d\n", i)
			case 5:
				b.WriteString("}\n")
			}
		}
		return b.String()
	}
	req.Messages = append(req.Messages, message{"user", []map[string]any{{"type": "text",
		"text": "The server drops long streams after a minute. Find out why and fix it, then run the tests."}}})
	for turn := 0; ; turn++ {
		id := fmt.Sprintf("toolu_%024d", turn)
		file := fmt.Sprintf("internal/server/handler_%d.go", turn)
		req.Messages = append(req.Messages,
			message{"assistant", []map[string]any{
				{"type": "text", "text": "Let me read " + file + " to see how it handles the stream's deadline."},
				{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": "/work/" + file}},
			}},
			message{"user", []map[string]any{
				{"type": "tool_result", "tool_use_id": id, "content": source(file, 120)},
			}})
		if b, _ := json.Marshal(req); len(b) > n-1<<10 {
			req.Messages = req.Messages[:len(req.Messages)-2]
			break
		}
	}
	last := map[string]any{"type": "text", "text": ""}
	req.Messages = append(req.Messages, message{"user", []map[string]any{last}})
	b, _ := json.Marshal(req)
	if short := n - len(b); short > 0 {
		last["text"] = strings.Repeat("Keep going. ", short/12+1)[:short]
		b, _ = json.Marshal(req)
	}
	return b
}
