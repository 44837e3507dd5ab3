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

// ecmaEscape matches a JavaScript \uXXXX escape, which Go's regexp spells
// \x{XXXX}.
var ecmaEscape = regexp.MustCompile(`\\u([0-9a-fA-F]{4})`)

// ecmaRegexp compiles a schema pattern, written for JavaScript, with Go's
// regexp after rewriting its \uXXXX escapes; the schema's patterns use no
// other JavaScript-only syntax.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	return regexp.Compile(ecmaEscape.ReplaceAllString(s, `\x{$1}`))
}
