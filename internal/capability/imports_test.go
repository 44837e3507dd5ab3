package capability_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/capability"
)

// deps is every package of the module that pkg imports, directly or
// through others.
func deps(pkgs map[string]*sourcePackage, pkg string) map[string]bool {
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
// every method of capability.Capability, by module-relative name.
func capabilities(pkgs map[string]*sourcePackage) []string {
	it := reflect.TypeFor[capability.Capability]()
	var caps []string
	for name, p := range pkgs {
		if !strings.HasPrefix(name, "internal/") {
			continue
		}
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
	pkgs := readModule(t)
	caps := capabilities(pkgs)
	for _, want := range []string{"internal/decide", "internal/egress", "internal/feedback", "internal/fountain", "internal/inference"} {
		if !slices.Contains(caps, want) {
			t.Fatalf("capabilities found in the source: %v; %s is missing (the test no longer finds them)", caps, want)
		}
	}
	for _, c := range caps {
		if deps(pkgs, c)["internal/broker"] {
			t.Errorf("capability %s imports internal/broker (directly or not); it must not", c)
		}
	}
	for _, pkg := range []string{"internal/admin", "internal/spend"} {
		if pkgs[pkg] == nil {
			t.Fatalf("%s not found", pkg)
		}
		d := deps(pkgs, pkg)
		for _, c := range append([]string{"internal/broker"}, caps...) {
			if d[c] {
				t.Errorf("%s imports %s (directly or not); it must not", pkg, c)
			}
		}
	}
}
