package capability_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// refusing are the packages under internal/ whose refusals reach a box
// and the broker's records: each must name its reason.
var refusing = []string{"broker", "capability", "decide", "egress", "egressproxy", "feedback", "fountain", "inference", "proxy", "spend"}

// TestRefusals_EveryReasonIsNamed walks the source of every package that
// refuses a box's request and holds that each refusal names its reason
// from capability.Reasons: every capability.Error it makes has a Reason,
// given as a capability.Reason* constant (or taken from another
// refusal); no reason is a string literal.
// It holds as well that each reason is a short lower-case word listed in
// docs/observability.md, and that ReasonOf, for an Error made without a
// Reason, never gives a status's text.
func TestRefusals_EveryReasonIsNamed(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	sites := 0
	for _, pkg := range refusing {
		dir := filepath.Join(root, pkg)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		inCapability := pkg == "capability"
		for _, ent := range ents {
			name := ent.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			at := func(n ast.Node) string {
				p := fset.Position(n.Pos())
				return "internal/" + pkg + "/" + name + ":" + strconv.Itoa(p.Line)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncDecl:
					// The constructor itself: Refuse names the reason it
					// is given.
					if inCapability && n.Recv == nil && n.Name.Name == "Refuse" {
						return false
					}
				case *ast.CompositeLit:
					if !isCapabilityName(n.Type, "Error", inCapability) {
						break
					}
					sites++
					r := field(n, "Reason")
					if r == nil {
						t.Errorf("%s: a capability.Error with no Reason", at(n))
					} else if !namedReason(r, inCapability) {
						t.Errorf("%s: a capability.Error whose Reason is not a capability.Reason* constant", at(n))
					}
				case *ast.CallExpr:
					if isCapabilityName(n.Fun, "Refuse", inCapability) {
						sites++
						if len(n.Args) == 0 || !namedReason(n.Args[0], inCapability) {
							t.Errorf("%s: capability.Refuse's reason is not a capability.Reason* constant", at(n))
						}
					}
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && strings.EqualFold(k.Name, "reason") && isStringLit(n.Value) {
						t.Errorf("%s: a reason given as a string literal; use a capability.Reason* constant", at(n))
					}
				case *ast.AssignStmt:
					for i, l := range n.Lhs {
						if s, ok := l.(*ast.SelectorExpr); ok && strings.EqualFold(s.Sel.Name, "reason") && i < len(n.Rhs) && isStringLit(n.Rhs[i]) {
							t.Errorf("%s: a reason given as a string literal; use a capability.Reason* constant", at(n))
						}
					}
				}
				return true
			})
		}
	}
	if sites < 50 {
		t.Errorf("found %d refusal sites, want the many there are: is the walk reading the source?", sites)
	}

	doc, err := os.ReadFile(filepath.Join(root, "..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	word := regexp.MustCompile(`^[a-z][a-z -]{1,23}[a-z]$`)
	seen := map[string]bool{}
	for _, r := range capability.Reasons {
		if seen[r] {
			t.Errorf("reason %q is listed twice", r)
		}
		seen[r] = true
		if !word.MatchString(r) {
			t.Errorf("reason %q is not a short lower-case word", r)
		}
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("reason %q is not listed in docs/observability.md", r)
		}
	}

	types := []string{"", protocol.TypePermission, protocol.TypeAuthn, protocol.TypeInvalid, protocol.TypeNotFound, protocol.TypeTooLarge,
		protocol.TypeRateLimit, protocol.TypeAPI, protocol.TypeOverloaded, protocol.TypeTimeout, protocol.TypeNotSupported, "capability_own_error"}
	for status := 400; status < 600; status++ {
		for _, typ := range types {
			got := capability.ReasonOf(&capability.Error{Status: status, Type: typ})
			if !slices.Contains(capability.Reasons, got) || got == http.StatusText(status) {
				t.Errorf("ReasonOf(%d %s) = %q, want one of capability.Reasons", status, typ, got)
			}
		}
	}
	if got := capability.ReasonOf(&capability.Error{Status: 403, Type: protocol.TypePermission, Reason: capability.ReasonBudget}); got != capability.ReasonBudget {
		t.Errorf("ReasonOf(a budget refusal) = %q, want %q", got, capability.ReasonBudget)
	}
}

// isCapabilityName reports whether e names the capability package's
// name: capability.name, or name itself inside the package.
func isCapabilityName(e ast.Expr, name string, inCapability bool) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "capability" && e.Sel.Name == name
	case *ast.Ident:
		return inCapability && e.Name == name
	}
	return false
}

// field is the value of lit's key, or nil.
func field(lit *ast.CompositeLit, key string) ast.Expr {
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == key {
				return kv.Value
			}
		}
	}
	return nil
}

// namedReason reports whether e is a reason named in one place: a
// capability.Reason* constant, another refusal's Reason, or what
// capability.ReasonOf gives.
func namedReason(e ast.Expr, inCapability bool) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return inCapability && strings.HasPrefix(e.Name, "Reason")
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "capability" {
			return strings.HasPrefix(e.Sel.Name, "Reason")
		}
		return e.Sel.Name == "Reason"
	case *ast.CallExpr:
		if s, ok := e.Fun.(*ast.SelectorExpr); ok {
			return s.Sel.Name == "ReasonOf"
		}
		if id, ok := e.Fun.(*ast.Ident); ok {
			return id.Name == "ReasonOf"
		}
	}
	return false
}

func isStringLit(e ast.Expr) bool {
	l, ok := e.(*ast.BasicLit)
	return ok && l.Kind == token.STRING && l.Value != `""`
}
