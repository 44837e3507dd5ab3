package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func TestParseDeclarationReport_Vectors(t *testing.T) {
	var doc struct {
		Cases []struct {
			Name   string          `json:"name"`
			Broker string          `json:"broker"`
			Body   json.RawMessage `json:"body"`
			Raw    *string         `json:"raw"`
			Note   string          `json:"note"`
			Want   struct {
				Status       int             `json:"status"`
				Capabilities json.RawMessage `json:"capabilities"`
				Listing      json.RawMessage `json:"listing"`
				Spend        json.RawMessage `json:"spend"`
			} `json:"want"`
		} `json:"cases"`
	}
	loadVectors(t, "declaration-reports.json", &doc)
	if len(doc.Cases) != 137 {
		t.Errorf("got %d cases, want 137", len(doc.Cases))
	}
	for _, tt := range doc.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			body := []byte(tt.Body)
			if tt.Raw != nil {
				body = []byte(*tt.Raw)
			}
			d, err := ParseDeclarationReport(body, tt.Broker)
			if tt.Want.Status != 200 {
				re, ok := err.(*ReportError)
				if !ok {
					t.Fatalf("ParseDeclarationReport = %+v, %v; want status %d", d, err, tt.Want.Status)
				}
				if re.Status != tt.Want.Status || re.Message == "" {
					t.Fatalf("status %d message %q, want %d", re.Status, re.Message, tt.Want.Status)
				}
				return
			}
			// boxbroker holds scope words to the schema, which refuses a
			// control character; the vector's note allows that refusal.
			if re, ok := err.(*ReportError); ok && re.Status == 400 && strings.Contains(re.Message, "control character") &&
				strings.Contains(tt.Note, "may refuse this report") {
				return
			}
			if err != nil {
				t.Fatalf("ParseDeclarationReport: %v, want 200", err)
			}
			same(t, "capabilities", d.Capabilities, tt.Want.Capabilities)
			if tt.Want.Listing != nil {
				same(t, "listing", d.Listing, tt.Want.Listing)
			} else if d.Listing != nil {
				t.Errorf("listing = %+v, want none", d.Listing)
			}
			if tt.Want.Spend != nil {
				same(t, "spend", d.Spend, tt.Want.Spend)
			} else if d.Spend != nil {
				t.Errorf("spend = %+v, want none", d.Spend)
			}
		})
	}
}

// same compares got, encoded, with want as JSON values.
func same(t *testing.T, what string, got any, want json.RawMessage) {
	t.Helper()
	g, _ := json.Marshal(got)
	var gv, wv any
	_ = json.Unmarshal(g, &gv)
	_ = json.Unmarshal(want, &wv)
	gb, _ := json.Marshal(gv)
	wb, _ := json.Marshal(wv)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

func TestDeclaredRefusal_Vectors(t *testing.T) {
	var doc struct {
		Cases []struct {
			Name       string          `json:"name"`
			Declared   json.RawMessage `json:"declared"`
			Broker     string          `json:"broker"`
			Capability string          `json:"capability"`
			Word       string          `json:"word"`
			Want       *string         `json:"want"`
		} `json:"cases"`
	}
	loadVectors(t, "refusal-messages.json", &doc)
	for _, tt := range doc.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			var declared *Declaration
			if string(tt.Declared) != "null" && len(tt.Declared) > 0 {
				declared = &Declaration{}
				if err := json.Unmarshal(tt.Declared, declared); err != nil {
					t.Fatal(err)
				}
			}
			got := DeclaredRefusal(declared, tt.Broker, tt.Capability, tt.Word)
			want := ""
			if tt.Want != nil {
				want = *tt.Want
			}
			if got != want {
				t.Errorf("DeclaredRefusal = %q\nwant %q", got, want)
			}
		})
	}
}

func TestPayerHeader(t *testing.T) {
	gh := "github:octo"
	tests := []struct {
		in   string
		want *Payer
	}{
		{"shared", &Payer{Kind: "shared"}},
		{"owner github:octo", &Payer{Kind: "owner", Principal: &gh}},
		{"visitor github:octo", &Payer{Kind: "visitor", Principal: &gh}},
		{"bogus", nil},
		{"", nil},
		{"owner ", nil},
		{"owner a b", nil},
	}
	for _, tt := range tests {
		got, err := ParsePayerHeader(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("ParsePayerHeader(%q) = %+v, want error", tt.in, got)
			}
			continue
		}
		if err != nil || FormatPayerHeader(got) != FormatPayerHeader(*tt.want) {
			t.Errorf("ParsePayerHeader(%q) = %+v, %v; want %+v", tt.in, got, err, *tt.want)
		}
		if FormatPayerHeader(got) != tt.in {
			t.Errorf("FormatPayerHeader(ParsePayerHeader(%q)) = %q", tt.in, FormatPayerHeader(got))
		}
	}
}

func TestIsGrantValue(t *testing.T) {
	long := string(bytes.Repeat([]byte("a"), MaxGrantLen))
	tests := []struct {
		in   string
		want bool
	}{
		{"g_abc", true}, {long, true}, {long + "a", false}, {"", false}, {"a b", false}, {"a\x7f", false}, {"é", false},
	}
	for _, tt := range tests {
		if got := IsGrantValue(tt.in); got != tt.want {
			t.Errorf("IsGrantValue(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestQuote_MatchesEncoder(t *testing.T) {
	tests := []string{"", "agent", "GITHUB_API", "lobby", `say "hi"`, `back\slash`, "tab\there", "<&>", "é", "\u2028", "del\x7f"}
	for _, tt := range tests {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(tt)
		want := strings.TrimSuffix(buf.String(), "\n")
		if got := quote(tt); got != want {
			t.Errorf("quote(%q) = %s, want %s", tt, got, want)
		}
	}
}

// TestParseDeclarationReport_ControlCharacterInScope: the schema allows no
// C0 control character in a scope word, so a report holding one is a 400
// that says so, and none reaches an operator's terminal.
func TestParseDeclarationReport_ControlCharacterInScope(t *testing.T) {
	tests := []string{"\u001b]0;pwned\u0007", "a\u0000b", "tab\there", "new\nline"}
	for _, w := range tests {
		word, _ := json.Marshal(w)
		body := []byte(`{"capabilities":[{"name":"egress","broker":"lobby","scope":[` + string(word) + `]}]}`)
		d, err := ParseDeclarationReport(body, "lobby")
		var re *ReportError
		if !errors.As(err, &re) || !strings.Contains(re.Message, "control character") {
			t.Errorf("ParseDeclarationReport(scope %q) = %+v, %v; want a refusal naming the control character", w, d, err)
		}
	}
	if _, err := ParseDeclarationReport([]byte(`{"capabilities":[{"name":"egress","broker":"lobby","scope":["GITHUB","ünïcode"]}]}`), "lobby"); err != nil {
		t.Errorf("ParseDeclarationReport of printable words = %v", err)
	}
}

// TestIsPrincipal_WhiteSpaceIsJavaScripts: a principal has no white space
// as the schema's pattern ^[^\s]+$ reads it in JavaScript: every space
// and line terminator of ECMA-262, and nothing else (not U+0085, nor the
// zero-width space).
func TestIsPrincipal_WhiteSpaceIsJavaScripts(t *testing.T) {
	space := []rune{'\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff}
	for r := rune(0x2000); r <= 0x200a; r++ {
		space = append(space, r)
	}
	for _, r := range space {
		if p := "a" + string(r) + "b"; IsPrincipal(p) {
			t.Errorf("IsPrincipal(%q) = true, want false", p)
		}
	}
	for _, r := range []rune{0x85, 0x200b, 0x180e, 'x', ':'} {
		if p := "a" + string(r) + "b"; !IsPrincipal(p) {
			t.Errorf("IsPrincipal(%q) = false, want true", p)
		}
	}
}
