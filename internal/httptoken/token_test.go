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

func TestListed(t *testing.T) {
	for _, tc := range []struct {
		v, t string
		want bool
	}{
		{"close", "close", true}, {"keep-alive, Close", "close", true}, {" \tclose\t ,x", "close", true},
		{"closed", "close", false}, {"", "close", false}, {"keep-alive", "close", false},
		{"close\u00a0", "close", false}, // only optional whitespace is trimmed, as net/http trims it
	} {
		if got := Listed(tc.v, tc.t); got != tc.want {
			t.Errorf("Listed(%q, %q) = %v, want %v", tc.v, tc.t, got, tc.want)
		}
	}
}
