package protocol

import (
	"strings"
	"testing"
)

func TestSecretRule_Match(t *testing.T) {
	tests := []struct {
		rule, method, path string
		want               bool
	}{
		{"GET /repos/acme/**", "GET", "/repos/acme", true},
		{"GET /repos/acme/**", "GET", "/repos/acme/app/pulls/1", true},
		{"GET /repos/acme/**", "POST", "/repos/acme/app", false},
		{"GET /repos/acme/**", "GET", "/repos/acmex", false},
		{"get /repos/acme/**", "GET", "/repos/acme/app", true},
		{"POST /repos/acme/*/issues", "POST", "/repos/acme/app/issues", true},
		{"POST /repos/acme/*/issues", "POST", "/repos/acme/app/x/issues", false},
		{"POST /repos/acme/*/issues", "POST", "/repos/acme//issues", false},
		{"POST /repos/acme/*/issues", "POST", "/repos/acme/app/issues/1", false},
		{"GET /repos/acme/**", "HEAD", "/repos/acme/app", true},
		{"HEAD /repos/acme/**", "GET", "/repos/acme/app", false},
		{"* /status", "DELETE", "/status", true},
		{"* /status", "DELETE", "/status/x", false},
		{"* /**", "PATCH", "/", true},
		{"GET /", "GET", "/", true},
		{"GET /", "GET", "/x", false},
	}
	for _, tt := range tests {
		r, err := ParseSecretRule(tt.rule)
		if err != nil {
			t.Fatalf("ParseSecretRule(%q) = %v", tt.rule, err)
		}
		if got := r.Match(tt.method, strings.Split(tt.path[1:], "/")); got != tt.want {
			t.Errorf("ParseSecretRule(%q).Match(%q, %q) = %v, want %v", tt.rule, tt.method, tt.path, got, tt.want)
		}
	}
}

func TestCheckSecretRules(t *testing.T) {
	tests := []struct {
		rules []string
		rate  string
		says  string // "" for no error
	}{
		{[]string{"get /a/**", "POST /a/*/b"}, "120/m", ""},
		{nil, "", ""},
		{[]string{"GET"}, "", "METHOD PATTERN"},
		{[]string{"GET a"}, "", "beginning with /"},
		{[]string{"GET /a/**/b"}, "", "must come last"},
		{[]string{"GET /a*"}, "", "whole segment"},
		{[]string{"GET /a/../b"}, "", "dot segment"},
		{[]string{"GET /a//b"}, "", "empty segment"},
		{[]string{"GET /a%2Fb"}, "", "decoded"},
		{[]string{"GE T /a"}, "", "beginning with /"},
		{[]string{"G(T /a"}, "", "not a method"},
		{[]string{"GET /a", "get /a"}, "", "twice"},
		{nil, "0/m", "N/PERIOD"},
		{nil, "5/d", "s, m or h"},
	}
	for _, tt := range tests {
		_, _, err := CheckSecretRules(tt.rules, tt.rate)
		if tt.says == "" && err != nil || tt.says != "" && (err == nil || !strings.Contains(err.Error(), tt.says)) {
			t.Errorf("CheckSecretRules(%q, %q) = %v, want an error saying %q", tt.rules, tt.rate, err, tt.says)
		}
	}
	rules, rate, _ := CheckSecretRules([]string{" get  /a/** "}, "5/s")
	if len(rules) != 1 || rules[0] != "GET /a/**" || rate != "5/s" {
		t.Errorf("CheckSecretRules kept %q %q, want [GET /a/**] 5/s", rules, rate)
	}
}
