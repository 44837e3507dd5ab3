package admin

import "strings"

// RulesMessage is the audit log's message for setting the secret name
// with rules and rate (never its value): what it may be spent on.
func RulesMessage(name string, rules []string, rate string) string {
	what := "any method and path"
	if len(rules) > 0 {
		what = "only " + strings.Join(rules, " and ")
	}
	if rate == "" {
		rate = "no rate"
	} else {
		rate = "at most " + rate + " for each box"
	}
	return "set the secret " + name + ": it allows " + what + ", " + rate
}
