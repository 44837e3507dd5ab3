package capability_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
)

const internalPath = "github.com/intentius/boxbroker/internal/"

// internalPackage is one package under internal/, as its source (test
// files left out) says: what it imports from internal/, and the method
// names of each type it declares.
type internalPackage struct {
	imports []string            // under internal/, e.g. "broker"
	methods map[string][]string // receiver type name → method names
}

// readInternal parses every non-test Go file under internal/ (the
// directory above this package's), imports and declarations only.
func readInternal(t *testing.T) map[string]*internalPackage {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*internalPackage{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		p := pkgs[name]
		if p == nil {
			p = &internalPackage{methods: map[string][]string{}}
			pkgs[name] = p
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(ip, internalPath); ok && !slices.Contains(p.imports, dep) {
				p.imports = append(p.imports, dep)
			}
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) != 1 {
				continue
			}
			recv := fd.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				p.methods[id.Name] = append(p.methods[id.Name], fd.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// deps is every package under internal/ that pkg imports, directly or
// through others.
func deps(pkgs map[string]*internalPackage, pkg string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		if pp := pkgs[p]; pp != nil {
			for _, d := range pp.imports {
				if !seen[d] {
					seen[d] = true
					walk(d)
				}
			}
		}
	}
	walk(pkg)
	return seen
}

// capabilities are the packages under internal/ that declare a type with
// every method of capability.Capability.
func capabilities(pkgs map[string]*internalPackage) []string {
	it := reflect.TypeFor[capability.Capability]()
	var caps []string
	for name, p := range pkgs {
		for _, ms := range p.methods {
			all := true
			for i := range it.NumMethod() {
				if !slices.Contains(ms, it.Method(i).Name) {
					all = false
					break
				}
			}
			if all {
				caps = append(caps, name)
				break
			}
		}
	}
	slices.Sort(caps)
	return caps
}

// TestImports_PointOneWay holds the layering, read from the source: no
// capability imports the box-facing handler (broker), and neither the
// admin API nor the meter (spend) imports a capability, directly or
// through another package, so that who pays and what the owner manages
// never depend on one capability's code. A capability is a package that
// declares a type with capability.Capability's methods.
func TestImports_PointOneWay(t *testing.T) {
	pkgs := readInternal(t)
	caps := capabilities(pkgs)
	for _, want := range []string{"decide", "egress", "feedback", "fountain", "inference"} {
		if !slices.Contains(caps, want) {
			t.Fatalf("capabilities found in the source: %v; %s is missing (the test no longer finds them)", caps, want)
		}
	}
	for _, c := range caps {
		if deps(pkgs, c)["broker"] {
			t.Errorf("capability internal/%s imports internal/broker (directly or not); it must not", c)
		}
	}
	for _, pkg := range []string{"admin", "spend"} {
		if pkgs[pkg] == nil {
			t.Fatalf("internal/%s not found", pkg)
		}
		d := deps(pkgs, pkg)
		for _, c := range append([]string{"broker"}, caps...) {
			if d[c] {
				t.Errorf("internal/%s imports internal/%s (directly or not); it must not", pkg, c)
			}
		}
	}
}
