package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Error types carried in a refusal body's error.type.
const (
	TypePermission   = "permission_error"
	TypeAuthn        = "authentication_error"
	TypeInvalid      = "invalid_request_error"
	TypeNotFound     = "not_found_error"
	TypeTooLarge     = "request_too_large"
	TypeRateLimit    = "rate_limit_error"
	TypeAPI          = "api_error"
	TypeOverloaded   = "overloaded_error"
	TypeTimeout      = "timeout_error"
	TypeNotSupported = "not_supported_error"
)

// TypeOf is the error type a refusal answered with status carries, as
// the Anthropic API pairs them: a 401 (and a 407) is an
// authentication_error, a 403 a permission_error, a 404 a
// not_found_error, a 413 a request_too_large, a 429 a rate_limit_error,
// a 504 a timeout_error, a 529 an overloaded_error and a 501 a
// not_supported_error; any other 4xx is an invalid_request_error, and
// any other 5xx an api_error.
func TypeOf(status int) string {
	switch status {
	case http.StatusUnauthorized, http.StatusProxyAuthRequired:
		return TypeAuthn
	case http.StatusForbidden:
		return TypePermission
	case http.StatusNotFound:
		return TypeNotFound
	case http.StatusRequestEntityTooLarge:
		return TypeTooLarge
	case http.StatusTooManyRequests:
		return TypeRateLimit
	case http.StatusNotImplemented:
		return TypeNotSupported
	case http.StatusGatewayTimeout:
		return TypeTimeout
	case 529:
		return TypeOverloaded
	}
	if status < 500 {
		return TypeInvalid
	}
	return TypeAPI
}

// Refusal is the body of every refusal:
// {"type":"error","error":{"type":...,"message":...}}.
type Refusal struct {
	Type  string       `json:"type"`
	Error RefusalError `json:"error"`
}

// RefusalError is a refusal's error object.
type RefusalError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// ReadRefusal reads a refusal body's error type and message. Its error
// is the protocol's object, or a message alone (a string; type is then
// ""); a field of the wrong kind reads as "", the others as they are.
// Both are "" for a body with no error.
func ReadRefusal(body []byte) (typ, message string) {
	var r struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || json.Unmarshal(r.Error, &message) == nil {
		return "", message
	}
	var e RefusalError
	_ = json.Unmarshal(r.Error, &e)
	return e.Type, e.Message
}

// RefusalBody encodes the refusal body for a type and a message.
func RefusalBody(typ, message string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(Refusal{Type: "error", Error: RefusalError{Type: typ, Message: message}})
	return buf.Bytes()
}

// WriteRefusal writes a refusal with status, type and message. The message
// must be safe to show to the box: it is never an internal error's text.
func WriteRefusal(w http.ResponseWriter, status int, typ, message string) {
	body := RefusalBody(typ, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// quote writes s as a JSON string, as JSON.stringify does.
func quote(s string) string {
	if plainASCII(s) {
		return `"` + s + `"`
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// plainASCII reports whether s is printable ASCII with no quote or
// backslash: a string JSON writes as it is, between quotes.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func entryText(capability, broker, word string) string {
	return `{ "name": ` + quote(capability) + `, "broker": ` + quote(broker) + `, "scope": [` + quote(word) + `] }`
}

// DeclaredRefusal returns the refusal message for a request that needs word
// of capability, judged on declared, the box's last report as kept by a
// broker answering for broker, or "" when the declaration allows it. A nil
// declared is a box that never reported. It returns exactly what chant's
// declaredRefusal returns.
func DeclaredRefusal(declared *Declaration, broker, capability, word string) string {
	if declared == nil {
		return "The broker has no declaration from this box yet, so it brokers nothing for it, and " +
			capability + " " + word + " needs " + entryText(capability, broker, word) +
			" in the box block of its chant.workspace.json, reported to " + RouteDeclaration + "."
	}
	entry := declared.Find(capability, broker)
	if entry == nil {
		return "This box declares no " + capability + " capability brokered by " + broker + ". Add " +
			entryText(capability, broker, word) + " to the box block in its chant.workspace.json."
	}
	if slices.Contains(entry.Scope, word) {
		return ""
	}
	lists := "nothing"
	if len(entry.Scope) > 0 {
		lists = strings.Join(entry.Scope, ", ")
	}
	return "This box's " + capability + " capability does not list " + word + " in its scope (it lists " + lists +
		"). Add " + quote(word) + " to that scope in the box block of its chant.workspace.json."
}

// RetryAfter reads an answer's Retry-After (RFC 9110, section 10.2.3):
// a whole number of seconds, or an HTTP date, a date already past being
// zero. A number too large for a time.Duration is the longest one: the
// caller bounds the wait to its own most. ok is false when the header is
// absent or is neither form (a sign, a fraction or an exponent
// included), and the caller waits as it would with none.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64, true // only digits: too large
		}
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
