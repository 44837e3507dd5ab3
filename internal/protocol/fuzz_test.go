package protocol

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzParseDeclarationReport holds the parser to its contract for any
// body: a *ReportError with a message and status 400 or 413, or a report
// within every limit whose answer encodes as JSON.
func FuzzParseDeclarationReport(f *testing.F) {
	f.Add([]byte(`{"capabilities":[{"name":"inference","broker":"lobby","scope":["agent","decide"]}]}`))
	f.Add([]byte(`{"capabilities":[],"listing":{"title":"Salad","line":"a salad app"},"spend":{"month":"2026-10","usd":1.84,"runs":3,"unpriced":1,"byPrincipal":[{"principal":null,"usd":0,"runs":1,"unpriced":1}]}}`))
	f.Add([]byte(`{"capabilities":[{"name":"egress","broker":"lobby","scope":["S","S"]},{"name":"egress","broker":"lobby","scope":["T"]}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte("\ufeff{}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseDeclarationReport(body, "lobby")
		if err != nil {
			re, ok := err.(*ReportError)
			if !ok || re.Message == "" || (re.Status != 400 && re.Status != 413) {
				t.Fatalf("error %#v is not a 400/413 with a message", err)
			}
			return
		}
		if len(body) > DeclarationMaxBytes {
			t.Fatalf("accepted a %d-byte body", len(body))
		}
		if len(d.Capabilities) > MaxCapabilities {
			t.Fatalf("kept %d capabilities", len(d.Capabilities))
		}
		names := map[string]bool{}
		for _, c := range d.Capabilities {
			if !IsCapabilityName(c.Name) || c.Broker != "lobby" || names[c.Name] || c.Scope == nil {
				t.Fatalf("kept entry %+v", c)
			}
			names[c.Name] = true
			words := map[string]bool{}
			for _, w := range c.Scope {
				if words[w] || jsLen(w) < 1 || jsLen(w) > MaxScopeWordLen {
					t.Fatalf("kept word %q in %+v", w, c)
				}
				words[w] = true
			}
		}
		if l := d.Listing; l != nil && (jsLen(l.Title) > MaxTitleLen || jsLen(l.Line) > MaxLineLen) {
			t.Fatalf("kept listing %+v", l)
		}
		if s := d.Spend; s != nil {
			if !IsMonth(s.Month) || len(s.ByPrincipal) > MaxPrincipals || bad(s.USD) || s.Runs < 0 || s.Unpriced < 0 {
				t.Fatalf("kept spend %+v", s)
			}
			for _, p := range s.ByPrincipal {
				if bad(p.USD) || (p.Principal != nil && (jsLen(*p.Principal) < 1 || jsLen(*p.Principal) > MaxPrincipalLen)) {
					t.Fatalf("kept principal %+v", p)
				}
			}
		}
		if _, err := json.Marshal(KeptOf(d, nil)); err != nil {
			t.Fatalf("answer does not encode: %v", err)
		}
	})
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v >= SpendFigureBound }

// FuzzPayerHeader: whatever parses formats back to the same header, and
// a payer that formats parses back to itself.
func FuzzPayerHeader(f *testing.F) {
	for _, s := range []string{"shared", "owner github:octo", "visitor github:ada", "owner", "x y", "visitor  a", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		p, err := ParsePayerHeader(v)
		if err != nil {
			return
		}
		if !IsPayerKind(p.Kind) || (p.Principal != nil && !IsPrincipal(*p.Principal)) {
			t.Fatalf("ParsePayerHeader(%q) = %+v", v, p)
		}
		if got := FormatPayerHeader(p); got != v {
			t.Fatalf("FormatPayerHeader(ParsePayerHeader(%q)) = %q", v, got)
		}
	})
}

// FuzzIsGrantValue: an accepted grant is 1 to 2048 printable ASCII bytes
// with no space.
func FuzzIsGrantValue(f *testing.F) {
	for _, s := range []string{"bbg_abc", "a b", "", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !IsGrantValue(v) {
			return
		}
		if len(v) < 1 || len(v) > MaxGrantLen {
			t.Fatalf("accepted length %d", len(v))
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x21 || v[i] > 0x7e {
				t.Fatalf("accepted byte %#x", v[i])
			}
		}
	})
}
