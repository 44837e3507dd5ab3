package brokertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/upstreamtest"
)

// messagesRequest is what the Anthropic stand-in reads of a Messages
// request: its model, whether it streams, and the structured output it
// asks for.
type messagesRequest struct {
	Model        string `json:"model"`
	Stream       bool   `json:"stream"`
	OutputConfig *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// asStructured decodes body as a Messages request, and reports whether
// it asks for structured output with a JSON schema.
func asStructured(body []byte) (messagesRequest, bool) {
	var req messagesRequest
	ok := json.Unmarshal(body, &req) == nil && req.OutputConfig != nil &&
		req.OutputConfig.Format != nil && req.OutputConfig.Format.Type == "json_schema"
	return req, ok
}

// answerStructured answers r, a Messages request that asks for
// structured output (req, as asStructured decoded it), with the JSON
// AnswerFromSchema makes from its schema, in one text block, as the
// Anthropic API does. Like the API, it refuses with a 400 a request with
// no anthropic-version, or whose schema has an object that does not set
// additionalProperties to false.
func answerStructured(w http.ResponseWriter, r *http.Request, req messagesRequest) {
	if r.Header.Get("Anthropic-Version") == "" {
		protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return
	}
	var schema any
	if err := json.Unmarshal(req.OutputConfig.Format.Schema, &schema); err != nil {
		protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "output_config.format.schema: not JSON")
		return
	}
	v, err := AnswerFromSchema(schema)
	if err != nil {
		protocol.WriteRefusal(w, http.StatusBadRequest, "invalid_request_error", "output_config.format.schema: "+err.Error())
		return
	}
	text, _ := json.Marshal(v)
	_, _ = io.WriteString(w, upstreamtest.Message(req.Model, string(text)))
}

// AnswerFromSchema makes the value a structured-output stand-in answers
// for a JSON Schema: the first enum value; for an object, every property,
// its numbers split evenly (each of an object's n number properties is
// 1/n); "stand-in" for a string, true for a boolean, an empty array. It
// returns an error for a schema the Anthropic API would refuse: an object
// that does not set additionalProperties to false, or a type it does not
// know.
func AnswerFromSchema(schema any) (any, error) {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil, errors.New("a schema must be an object")
	}
	if enum, ok := s["enum"].([]any); ok {
		if len(enum) == 0 {
			return nil, errors.New("enum is empty")
		}
		return enum[0], nil
	}
	switch s["type"] {
	case "object":
		if s["additionalProperties"] != false {
			return nil, errors.New("an object must set additionalProperties to false")
		}
		props, _ := s["properties"].(map[string]any)
		numbers := 0
		for _, p := range props {
			if ps, ok := p.(map[string]any); ok && ps["type"] == "number" && ps["enum"] == nil {
				numbers++
			}
		}
		out := make(map[string]any, len(props))
		for k, p := range props {
			if ps, ok := p.(map[string]any); ok && ps["type"] == "number" && ps["enum"] == nil {
				out[k] = 1 / float64(numbers)
				continue
			}
			v, err := AnswerFromSchema(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = v
		}
		return out, nil
	case "number":
		return 1.0, nil
	case "integer":
		return 1, nil
	case "string":
		return "stand-in", nil
	case "boolean":
		return true, nil
	case "array":
		return []any{}, nil
	case "null":
		return nil, nil
	}
	return nil, fmt.Errorf("type %v is not a type structured outputs know", s["type"])
}
