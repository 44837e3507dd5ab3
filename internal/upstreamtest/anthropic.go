package upstreamtest

import "encoding/json"

// Message is a Messages answer as the Anthropic API sends it: one text
// block of model saying text, 12 input and 6 output tokens.
func Message(model, text string) string {
	return `{"id":"msg_standin","type":"message","role":"assistant","model":` + quote(model) + `,"content":[{"type":"text","text":` + quote(text) + `}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`
}

// StreamEvents are the data of Message's events as the Anthropic API
// streams it, in order: message_start, content_block_start, ping,
// content_block_delta, content_block_stop, message_delta, message_stop.
func StreamEvents(model, text string) []string {
	return []string{
		`{"type":"message_start","message":{"id":"msg_standin","type":"message","role":"assistant","model":` + quote(model) + `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type": "ping"}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":` + quote(text) + `}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":6}}`,
		`{"type":"message_stop"}`,
	}
}

// SSEEvents are StreamEvents as server-sent events, each named by its
// data's type.
func SSEEvents(model, text string) []string {
	events := StreamEvents(model, text)
	for i, data := range events {
		var ev struct{ Type string }
		_ = json.Unmarshal([]byte(data), &ev)
		events[i] = "event: " + ev.Type + "\ndata: " + data + "\n\n"
	}
	return events
}

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
