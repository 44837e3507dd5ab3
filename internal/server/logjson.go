package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// jsonLines is slog's JSON handler with a fast path: a record whose
// attributes are all strings, numbers, booleans, durations, times or
// string slices (a request's line, which every request logs) is written
// here, byte for byte as slog.JSONHandler writes it, without slog's
// per-value encoding/json calls; any other record, and every handler
// derived by WithAttrs or WithGroup, is slog.JSONHandler's.
type jsonLines struct {
	std *slog.JSONHandler // says which levels are enabled, and writes the rest
	w   io.Writer
	mu  *sync.Mutex // orders whole lines on w, as slog's handler does
}

func newJSONLines(w io.Writer, level slog.Leveler) *jsonLines {
	return &jsonLines{std: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}), w: w, mu: new(sync.Mutex)}
}

func (h *jsonLines) Enabled(ctx context.Context, l slog.Level) bool {
	return h.std.Enabled(ctx, l)
}

func (h *jsonLines) WithAttrs(attrs []slog.Attr) slog.Handler { return h.std.WithAttrs(attrs) }
func (h *jsonLines) WithGroup(name string) slog.Handler       { return h.std.WithGroup(name) }

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (h *jsonLines) Handle(ctx context.Context, r slog.Record) error {
	simple := true
	r.Attrs(func(a slog.Attr) bool {
		simple = a.Key != "" && simpleValue(a.Value)
		return simple
	})
	if !simple {
		return h.std.Handle(ctx, r)
	}
	p := lineBuffers.Get().(*[]byte)
	b := append((*p)[:0], '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":`...)
		b = appendJSONTime(b, r.Time)
		b = append(b, ',')
	}
	b = append(b, `"level":`...)
	b = appendJSONString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = appendJSONString(b, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b = append(b, ',')
		b = appendJSONString(b, a.Key)
		b = append(b, ':')
		b = appendSimpleValue(b, a.Value)
		return true
	})
	b = append(b, "}\n"...)
	h.mu.Lock()
	_, err := h.w.Write(b)
	h.mu.Unlock()
	if cap(b) <= 16<<10 {
		*p = b
		lineBuffers.Put(p)
	}
	return err
}

// simpleValue reports whether v is a value jsonLines writes itself.
func simpleValue(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString, slog.KindInt64, slog.KindUint64, slog.KindBool, slog.KindDuration, slog.KindTime:
		return true
	case slog.KindFloat64:
		f := v.Float64()
		return !math.IsInf(f, 0) && !math.IsNaN(f)
	case slog.KindAny:
		_, ok := v.Any().([]string)
		return ok
	}
	return false
}

func appendSimpleValue(b []byte, v slog.Value) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendJSONString(b, v.String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10)
	case slog.KindTime:
		return appendJSONTime(b, v.Time())
	case slog.KindFloat64:
		return appendJSONFloat(b, v.Float64())
	}
	ss, _ := v.Any().([]string)
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEscaped(b, s, true)
	}
	return append(b, ']')
}

// appendJSONTime is slog's: RFC 3339 with nanoseconds, quoted.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONFloat writes f as encoding/json does (which slog calls).
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 becomes e-9, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString writes s quoted and escaped as slog's JSON handler
// does: HTML characters as they are, invalid UTF-8 as U+FFFD, U+2028 and
// U+2029 escaped.
func appendJSONString(b []byte, s string) []byte { return appendEscaped(b, s, false) }

// appendEscaped is appendJSONString, or with encodingJSON what
// encoding/json writes (with HTML escaping off, as slog calls it for a
// slice): \b and \f too.
func appendEscaped(b []byte, s string, encodingJSON bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				if encodingJSON {
					b = append(b, '\\', 'b')
					break
				}
				b = append(b, '\\', 'u', '0', '0', '0', '8')
			case '\f':
				if encodingJSON {
					b = append(b, '\\', 'f')
					break
				}
				b = append(b, '\\', 'u', '0', '0', '0', 'c')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
