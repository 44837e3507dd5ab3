package token_test

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/egress"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/token"
)

// TestShape_ScrubberAndEgressFindWhatIsMinted holds the two readers of a
// token's shape to the shape token mints: proxy.ScrubTokens replaces
// every kind token.New* makes, and nothing one character short, with a
// character outside the alphabet, or under another prefix; egress's
// FindTokens (through token.AppendFound) finds a box token, and no grant,
// admin token or box token one character short.
func TestShape_ScrubberAndEgressFindWhatIsMinted(t *testing.T) {
	p := token.Prefixes()
	if p != [3]string{token.BoxPrefix, token.GrantPrefix, token.AdminPrefix} {
		t.Errorf("Prefixes() = %q, want box, grant, admin", p)
	}
	for _, s := range p {
		if len(s) != len(token.BoxPrefix) || !strings.HasSuffix(s, "_") {
			t.Errorf("prefix %q is not three letters and _", s)
		}
	}
	if token.BodyLen != 43 || token.Len != 47 {
		t.Errorf("BodyLen, Len = %d, %d, want 43, 47", token.BodyLen, token.Len)
	}
	tests := []struct {
		kind string
		mint func() (string, error)
		box  bool
	}{
		{"box", token.NewBox, true},
		{"grant", token.NewGrant, false},
		{"admin", token.NewAdmin, false},
	}
	eg := &egress.Capability{}
	findInQuery := func(s string) []string {
		r := httptest.NewRequest("GET", "http://broker/egress/X/y?key="+url.QueryEscape(s), nil)
		return eg.FindTokens(r)
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			tok, err := tt.mint()
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) != token.Len {
				t.Errorf("len(%q) = %d, want token.Len %d", tok, len(tok), token.Len)
			}
			for i := len(token.BoxPrefix); i < len(tok); i++ {
				if !token.IsBodyByte(tok[i]) {
					t.Errorf("%q[%d] = %q, not a byte IsBodyByte takes", tok, i, tok[i])
				}
			}
			in := "a " + tok + " b"
			if got, n := proxy.ScrubTokens(in); n != 1 || got != "a "+proxy.TokenMarker(len(tok))+" b" {
				t.Errorf("ScrubTokens(%q) = %q, %d, want the token marked, 1", in, got, n)
			}
			var want []string
			if tt.box {
				want = []string{tok}
			}
			if got := findInQuery(tok); !slices.Equal(got, want) {
				t.Errorf("FindTokens(?key=%s) = %q, want %q", tok, got, want)
			}
			if got := token.AppendFound(nil, in, token.BoxPrefix); !slices.Equal(got, want) {
				t.Errorf("AppendFound(%q, BoxPrefix) = %q, want %q", in, got, want)
			}

			short := tok[:len(tok)-1]
			outside := tok[:10] + "." + tok[11:]
			other := "bbz_" + tok[len(token.BoxPrefix):]
			for _, s := range []string{short, outside, other} {
				if got, n := proxy.ScrubTokens(s + " "); n != 0 {
					t.Errorf("ScrubTokens(%q) = %q, %d, want it untouched", s, got, n)
				}
				if got := findInQuery(s); got != nil {
					t.Errorf("FindTokens(?key=%s) = %q, want none", s, got)
				}
			}
		})
	}
}

// TestIsBodyByte is the alphabet of unpadded base64url, and nothing else.
func TestIsBodyByte(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for c := range 256 {
		if got, want := token.IsBodyByte(byte(c)), strings.IndexByte(alphabet, byte(c)) >= 0; got != want {
			t.Errorf("IsBodyByte(%q) = %v, want %v", byte(c), got, want)
		}
	}
}

func TestAppendFound(t *testing.T) {
	body := strings.Repeat("A", token.BodyLen)
	tests := []struct {
		name, s string
		want    []string
	}{
		{"none", "no token here", nil},
		{"one", "k=bbx_" + body + "&x", []string{"bbx_" + body}},
		{"a longer run whole", "bbx_" + body + "Zz-", []string{"bbx_" + body + "Zz-"}},
		{"one short", "bbx_" + body[1:], nil},
		{"a short one then a whole one", "bbx_AB bbx_" + body, []string{"bbx_" + body}},
		{"two", "bbx_" + body + ".bbx_" + body, []string{"bbx_" + body, "bbx_" + body}},
		{"another prefix", "bbg_" + body, nil},
	}
	for _, tt := range tests {
		if got := token.AppendFound(nil, tt.s, token.BoxPrefix); !slices.Equal(got, tt.want) {
			t.Errorf("AppendFound(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
