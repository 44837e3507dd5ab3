package conformance

import (
	"sort"
	"strings"
)

// fromSchema makes the value the Anthropic stand-in answers a
// structured-output request with: a JSON value shaped by schema. An object
// gets every property; enum gives its first value and const its value; a
// string is "stand-in", a boolean true, an integer its minimum or 0, an
// array one item. The number properties of one object share 1 evenly
// (1/k each of k) when there are two or more; a lone number is the midpoint
// of its minimum and maximum when it has both, else 0.5. A local $ref
// (#/...) is followed; anyOf and oneOf take their first choice.
func fromSchema(schema map[string]any) any {
	return generate(schema, schema, 0)
}

// maxSchemaDepth bounds the recursion a self-referring schema could cause.
const maxSchemaDepth = 32

func generate(root, s map[string]any, depth int) any {
	if depth > maxSchemaDepth || s == nil {
		return nil
	}
	if ref, ok := s["$ref"].(string); ok {
		if target := resolveRef(root, ref); target != nil {
			return generate(root, target, depth+1)
		}
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[key].([]any); ok && len(alts) > 0 {
			if first, ok := alts[0].(map[string]any); ok {
				return generate(root, first, depth+1)
			}
		}
	}
	switch typeOf(s) {
	case "object":
		props, _ := s["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		numbers := 0
		for name, p := range props {
			names = append(names, name)
			if ps, ok := p.(map[string]any); ok && isPlainNumber(ps) {
				numbers++
			}
		}
		sort.Strings(names)
		out := make(map[string]any, len(props))
		for _, name := range names {
			ps, _ := props[name].(map[string]any)
			if numbers > 1 && isPlainNumber(ps) {
				out[name] = 1 / float64(numbers)
				continue
			}
			out[name] = generate(root, ps, depth+1)
		}
		return out
	case "array":
		item, _ := s["items"].(map[string]any)
		return []any{generate(root, item, depth+1)}
	case "string":
		return "stand-in"
	case "boolean":
		return true
	case "integer":
		if m, ok := number(s["minimum"]); ok {
			return m
		}
		return 0
	case "number":
		lo, hasLo := number(s["minimum"])
		hi, hasHi := number(s["maximum"])
		if hasLo && hasHi {
			return (lo + hi) / 2
		}
		return 0.5
	}
	return nil
}

// typeOf is a schema's type: its "type", the first non-null of a list of
// types, or object when it has properties.
func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if name, ok := x.(string); ok && name != "null" {
				return name
			}
		}
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	return ""
}

// isPlainNumber reports whether s is a number with no const or enum, one
// that takes a share when an object has several.
func isPlainNumber(s map[string]any) bool {
	if s == nil || typeOf(s) != "number" {
		return false
	}
	_, hasConst := s["const"]
	_, hasEnum := s["enum"]
	return !hasConst && !hasEnum
}

// number reads a JSON number decoded into any.
func number(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

// resolveRef follows a local reference such as #/$defs/x within root, or
// returns nil.
func resolveRef(root map[string]any, ref string) map[string]any {
	if ref == "#" {
		return root
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var cur any = root
	for _, part := range strings.Split(ref[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	m, _ := cur.(map[string]any)
	return m
}
