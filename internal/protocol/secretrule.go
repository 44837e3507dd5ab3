package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSecretRules is how many --allow rules one egress secret may hold.
const MaxSecretRules = 32

// SecretRule is one rule of what an egress secret may be spent on: a
// method ("*" for any) and a path pattern, matched against the path under
// the secret's base URL (see Match). Its zero value matches nothing.
type SecretRule struct {
	// Method is an upper-case method, or "*" for any.
	Method string
	// Segs are the pattern's segments: a literal segment, "*" for any one
	// segment, or "**" (last only) for any number of segments, none
	// included.
	Segs []string
}

// ParseSecretRule reads a rule written "METHOD PATTERN": a method (or
// "*") and a path beginning with "/", whose segments are literal text,
// "*" for one segment, or "**", as the last, for the rest; such as
// "GET /repos/acme/**" or "POST /repos/acme/*/issues". Its error says
// what is wrong in words fit for an operator.
func ParseSecretRule(s string) (SecretRule, error) {
	method, pattern, ok := strings.Cut(strings.TrimSpace(s), " ")
	pattern = strings.TrimSpace(pattern)
	if !ok || pattern == "" {
		return SecretRule{}, fmt.Errorf("rule %q must be 'METHOD PATTERN', such as 'GET /repos/acme/**'", s)
	}
	method = strings.ToUpper(method)
	if method != "*" && !isToken(method) {
		return SecretRule{}, fmt.Errorf("rule %q: %q is not a method (GET, POST, ... or * for any)", s, method)
	}
	if !strings.HasPrefix(pattern, "/") {
		return SecretRule{}, fmt.Errorf("rule %q: the pattern must be a path beginning with /, such as /repos/acme/**", s)
	}
	for _, c := range pattern {
		if c < 0x21 || c == 0x7f || c == '?' || c == '#' || c == '%' || c == '\\' {
			return SecretRule{}, fmt.Errorf("rule %q: the pattern holds %q; write the path as the host reads it, decoded, with no query, spaces or backslashes", s, c)
		}
	}
	segs := strings.Split(pattern[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "**" && i != len(segs)-1:
			return SecretRule{}, fmt.Errorf("rule %q: ** stands for the rest of the path and must come last", s)
		case seg != "*" && seg != "**" && strings.Contains(seg, "*"):
			return SecretRule{}, fmt.Errorf("rule %q: * stands for a whole segment (/*/), not part of one", s)
		case seg == "." || seg == "..":
			return SecretRule{}, fmt.Errorf("rule %q: the pattern holds a dot segment, which the broker never forwards", s)
		case seg == "" && i != len(segs)-1:
			return SecretRule{}, fmt.Errorf("rule %q: the pattern holds an empty segment (//)", s)
		}
	}
	return SecretRule{Method: method, Segs: segs}, nil
}

// isToken reports whether s is an HTTP method token (RFC 9110 tchar).
func isToken(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&'+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// String writes the rule as ParseSecretRule reads it.
func (r SecretRule) String() string { return r.Method + " /" + strings.Join(r.Segs, "/") }

// Match reports whether the rule allows method at the path whose decoded
// segments are segs (the path under the secret's base URL, split at "/",
// each segment percent-decoded). A GET rule allows HEAD too, which
// reads what GET does without its body. A literal segment matches itself
// exactly (case counts); "*" any one non-empty segment; "**" the rest,
// however many segments, none included.
func (r SecretRule) Match(method string, segs []string) bool {
	if r.Method != "*" && r.Method != method && !(r.Method == "GET" && method == "HEAD") {
		return false
	}
	for i, p := range r.Segs {
		if p == "**" {
			return true
		}
		if i >= len(segs) {
			return false
		}
		if p == "*" && segs[i] != "" || p == segs[i] {
			continue
		}
		return false
	}
	return len(segs) == len(r.Segs)
}

// SecretRate is a secret's rate for each box: N requests per Per.
type SecretRate struct {
	N   int
	Per time.Duration
}

// ParseSecretRate reads a rate written N/PERIOD, PERIOD one of s, m and
// h: "120/m" is 120 requests a minute. "" is no rate (a zero SecretRate).
func ParseSecretRate(s string) (SecretRate, error) {
	if s == "" {
		return SecretRate{}, nil
	}
	ns, per, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 1 || n > 1_000_000 {
		return SecretRate{}, fmt.Errorf("rate %q must be N/PERIOD, N from 1 to 1000000 and PERIOD s, m or h, such as 120/m", s)
	}
	d, ok := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[per]
	if !ok {
		return SecretRate{}, fmt.Errorf("rate %q: the period must be s, m or h, such as 120/m", s)
	}
	return SecretRate{N: n, Per: d}, nil
}

// String writes the rate as ParseSecretRate reads it; "" for none.
func (r SecretRate) String() string {
	if r.N == 0 {
		return ""
	}
	per := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	return strconv.Itoa(r.N) + "/" + per
}

// CheckSecretRules returns rules and rate as a secret keeps them (each
// rule as SecretRule.String writes it, the rate as SecretRate.String
// does), or an error saying which is wrong: at most MaxSecretRules
// rules, each one ParseSecretRule reads, none twice; a rate
// ParseSecretRate reads. Nil rules allow every method and path.
func CheckSecretRules(rules []string, rate string) ([]string, string, error) {
	if len(rules) > MaxSecretRules {
		return nil, "", fmt.Errorf("a secret holds at most %d rules, not %d", MaxSecretRules, len(rules))
	}
	var out []string
	seen := make(map[string]bool, len(rules))
	for _, s := range rules {
		r, err := ParseSecretRule(s)
		if err != nil {
			return nil, "", err
		}
		if seen[r.String()] {
			return nil, "", fmt.Errorf("rule %q is given twice", r.String())
		}
		seen[r.String()] = true
		out = append(out, r.String())
	}
	rt, err := ParseSecretRate(rate)
	if err != nil {
		return nil, "", err
	}
	return out, rt.String(), nil
}
