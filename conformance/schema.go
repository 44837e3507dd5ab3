package conformance

import (
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaJSON is a byte-identical copy of broker-protocol.schema.json.
//
//go:embed schema/broker-protocol.schema.json
var schemaJSON []byte

// Schema returns a copy of broker-protocol.schema.json, the JSON Schema of
// the protocol's bodies, against whose $defs the suite validates what a
// broker answers.
func Schema() []byte { return bytes.Clone(schemaJSON) }

// schemaID is the $id of the schema; a $def is compiled as schemaID#/$defs/name.
const schemaID = "https://intentius.io/chant/schemas/workspace/broker-protocol/v1/broker-protocol.schema.json"

// schemaDefs are the $defs the suite validates answers against.
var schemaDefs = []string{"declarationKept", "refusal", "decideResponse", "payer"}

// validator holds the compiled $defs of the schema by name.
type validator struct {
	defs map[string]*jsonschema.Schema
}

// newValidator compiles the $defs the suite uses.
func newValidator() (*validator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("read the protocol schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(ecmaRegexp)
	if err := c.AddResource(schemaID, doc); err != nil {
		return nil, fmt.Errorf("add the protocol schema: %w", err)
	}
	v := &validator{defs: map[string]*jsonschema.Schema{}}
	for _, name := range schemaDefs {
		s, err := c.Compile(schemaID + "#/$defs/" + name)
		if err != nil {
			return nil, fmt.Errorf("compile $defs/%s: %w", name, err)
		}
		v.defs[name] = s
	}
	return v, nil
}

// validate checks body, a JSON document, against the $def named def and
// returns a one-line description of what is wrong, or "" when it is valid.
func (v *validator) validate(def string, body []byte) string {
	s, ok := v.defs[def]
	if !ok {
		return "no $defs/" + def + " in the protocol schema"
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return "not JSON: " + err.Error()
	}
	if err := s.Validate(inst); err != nil {
		return "does not validate against $defs/" + def + ": " + strings.Join(strings.Fields(err.Error()), " ")
	}
	return ""
}

// jsSpace is JavaScript's white space, which its \s matches (the
// WhiteSpace and LineTerminator of ECMA-262), written for a Go character
// class. Go's own \s is ASCII alone, and holds no vertical tab.
const jsSpace = `\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`

// ecmaRegexp compiles a schema pattern, written for JavaScript, with Go's
// regexp: its \uXXXX escapes become \x{XXXX}, and its \s and \S
// JavaScript's white space rather than Go's. \S within a character class,
// which a Go class cannot hold, and an empty class ([] or [^]), which Go
// reads otherwise, are errors; the schema's patterns use no other
// JavaScript-only syntax.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			switch e := s[i]; {
			case e == 'u' && i+4 < len(s) && isHex(s[i+1:i+5]):
				b.WriteString(`\x{` + s[i+1:i+5] + `}`)
				i += 4
			case e == 's' && inClass:
				b.WriteString(jsSpace)
			case e == 's':
				b.WriteString(`[` + jsSpace + `]`)
			case e == 'S' && inClass:
				return nil, fmt.Errorf("pattern %q: \\S within a character class", s)
			case e == 'S':
				b.WriteString(`[^` + jsSpace + `]`)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case c == '[' && !inClass:
			inClass = true
			b.WriteByte(c)
			if i+1 < len(s) && s[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
			if i+1 < len(s) && s[i+1] == ']' {
				// JavaScript's [] matches nothing and [^] anything;
				// Go reads a ] there as itself.
				return nil, fmt.Errorf("pattern %q: an empty character class", s)
			}
		case c == ']' && inClass:
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return regexp.Compile(b.String())
}

// isHex reports whether s is hexadecimal digits alone.
func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdefABCDEF") == ""
}
