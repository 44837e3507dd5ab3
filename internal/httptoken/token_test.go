package httptoken

import "testing"

func TestValid(t *testing.T) {
	for s, want := range map[string]bool{
		"GET": true, "X-Api-Key": true, "x_y!#$%&'*+-.^_`|~09": true,
		"": false, "X Y": false, "X:": false, "é": false, "a\x00": false, "a\x7f": false, "(x)": false,
	} {
		if Valid(s) != want || Valid([]byte(s)) != want {
			t.Errorf("Valid(%q) = %v, want %v", s, Valid(s), want)
		}
	}
}
