package protocol

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter holds the edge cases of both readers it replaced: mint's
// (whole seconds, a sign taken, a number past int64 unread) and the
// credential pool's (fractions and exponents taken, a negative or a
// million seconds and more unread). Where they differed the table holds
// the safer reading: only RFC 9110's forms are read, and a number too
// large is the longest wait, which each caller bounds, not none at all.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		values []string // nil: no header
		want   time.Duration
		wantOK bool
	}{
		{"absent", nil, 0, false},
		{"empty", []string{""}, 0, false},
		{"seconds", []string{"7"}, 7 * time.Second, true},
		{"zero", []string{"0"}, 0, true},
		{"spaces around", []string{" 30 "}, 30 * time.Second, true},
		{"leading zeros", []string{"007"}, 7 * time.Second, true},
		{"a day", []string{"86400"}, 24 * time.Hour, true},
		{"a million seconds", []string{"1000000"}, 1000000 * time.Second, true},
		{"largest whole duration", []string{"9223372036"}, 9223372036 * time.Second, true},
		{"past a duration", []string{"9223372037"}, math.MaxInt64, true},
		{"past int64", []string{"99999999999999999999999"}, math.MaxInt64, true},
		{"negative", []string{"-5"}, 0, false},
		{"plus sign", []string{"+5"}, 0, false},
		{"fraction", []string{"1.5"}, 0, false},
		{"exponent", []string{"1e3"}, 0, false},
		{"hex float", []string{"0x1p4"}, 0, false},
		{"infinity", []string{"Inf"}, 0, false},
		{"NaN", []string{"NaN"}, 0, false},
		{"digits and words", []string{"5 seconds"}, 0, false},
		{"garbage", []string{"soon"}, 0, false},
		{"HTTP date ahead", []string{now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second, true},
		{"HTTP date past", []string{now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"HTTP date far ahead", []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, math.MaxInt64, true},
		{"RFC 850 date", []string{now.Add(time.Minute).Format("Monday, 02-Jan-06 15:04:05 GMT")}, time.Minute, true},
		{"ANSI C date", []string{now.Add(time.Minute).Format(time.ANSIC)}, time.Minute, true},
		{"the first of two", []string{"3", "9"}, 3 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.values != nil {
				h["Retry-After"] = tt.values
			}
			got, ok := RetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%q) = %v, %v, want %v, %v", tt.values, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestReadRefusal: the client's RefusedError and the conformance suite's
// checks read a refusal's error the same way, an object or a message
// alone.
func TestReadRefusal(t *testing.T) {
	tests := []struct {
		body, wantType, wantMessage string
	}{
		{string(RefusalBody(TypePermission, "This box may not.")), TypePermission, "This box may not."},
		{`{"error":"a message alone"}`, "", "a message alone"},
		{`{"error":{"type":1,"message":"the message stands"}}`, "", "the message stands"},
		{`{"error":null}`, "", ""},
		{`{"error":5}`, "", ""},
		{`{"type":"error"}`, "", ""},
		{`not JSON`, "", ""},
		{``, "", ""},
	}
	for _, tt := range tests {
		typ, msg := ReadRefusal([]byte(tt.body))
		if typ != tt.wantType || msg != tt.wantMessage {
			t.Errorf("ReadRefusal(%q) = %q, %q, want %q, %q", tt.body, typ, msg, tt.wantType, tt.wantMessage)
		}
	}
}
