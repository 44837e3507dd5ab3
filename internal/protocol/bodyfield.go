package protocol

import (
	"fmt"
	"regexp"
)

// MaxBodyFields is how many body fields one egress secret may name.
const MaxBodyFields = 8

var bodyFieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// IsBodyField reports whether s may name an egress secret's body field:
// a top-level field of a form or JSON request body, such as
// client_secret, matching ^[A-Za-z_][A-Za-z0-9_.-]{0,63}$.
func IsBodyField(s string) bool { return bodyFieldRE.MatchString(s) }

// CheckBodyFields returns nil when fields may be an egress secret's body
// fields: at most MaxBodyFields, each an IsBodyField name, none twice.
// Its error says which rule a field breaks, in words fit for an operator.
func CheckBodyFields(fields []string) error {
	if len(fields) > MaxBodyFields {
		return fmt.Errorf("a secret names at most %d body fields, not %d", MaxBodyFields, len(fields))
	}
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		if !IsBodyField(f) {
			return fmt.Errorf("body field %q must match ^[A-Za-z_][A-Za-z0-9_.-]{0,63}$: the name of a top-level field of a form or JSON body, such as client_secret", f)
		}
		if seen[f] {
			return fmt.Errorf("body field %q is named twice", f)
		}
		seen[f] = true
	}
	return nil
}
