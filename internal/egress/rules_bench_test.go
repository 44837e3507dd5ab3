package egress

import (
	"fmt"
	"testing"
)

// BenchmarkRules is the cost of matching a request against a secret's
// rules: 2 rules, and the most a secret holds (32), the request
// matching the last.
func BenchmarkRules(b *testing.B) {
	for _, n := range []int{2, 32} {
		var rules []string
		for i := range n - 1 {
			rules = append(rules, fmt.Sprintf("POST /repos/org%d/*/issues", i))
		}
		rules = append(rules, "GET /repos/acme/**")
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				whole, split, err := ruleSegments("/repos/acme/app/pulls/1%2F2/files")
				if err != nil || !allowed(rules, "GET", whole) || !allowed(rules, "GET", split) {
					b.Fatal("not allowed")
				}
			}
		})
	}
}
