package capability_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/intentius/boxbroker/"

// layers are the module's packages from the ground up, as
// docs/architecture.md states them: a package imports only packages of
// its own layer or of a layer below it. A package of the module that no
// layer names fails TestImports_Layers until it is placed.
var layers = []struct {
	name string
	pkgs []string
}{
	{"ground: the protocol and what knows nothing of the broker", []string{
		"internal/protocol", "internal/jsonfield", "internal/secrets", "internal/metrics", "internal/filelock",
		"internal/cloud", "internal/cloud/cloudtest", "internal/store", "internal/store/migrations", "internal/upstreamtest",
		"internal/telemetry", "internal/sso", "internal/sso/ssotest", "internal/webhook", "client", "conformance",
	}},
	{"storage: the stores", []string{
		"internal/store/spendsql", "internal/store/sqlstore", "internal/store/sqlite", "internal/store/postgres", "internal/store/deadline",
		"internal/store/storetest", "internal/store/sqlite/sqlitetest", "internal/store/postgres/postgrestest",
	}},
	{"parts: what a call is made of", []string{
		"internal/capability", "internal/token", "internal/cache", "internal/rule", "internal/grant", "internal/mint",
		"internal/proxy", "internal/pool", "internal/payer", "internal/spend", "internal/outbox", "internal/auditsink",
		"internal/ratelimit", "internal/approval", "internal/operator",
	}},
	{"capabilities", []string{
		"internal/inference", "internal/decide", "internal/egress", "internal/feedback", "internal/fountain",
	}},
	{"doors: the box-facing handler, the HTTPS proxy, the admin API", []string{
		"internal/broker", "internal/egressproxy", "internal/admin", "internal/admin/ui", "internal/admin/adminclient",
	}},
	{"assembly", []string{"internal/server"}},
	{"commands and whole-broker tests", []string{
		"cmd/boxbroker", "internal/brokertest", "bench", "e2e", "deploy", ".ci/testsummary",
	}},
}

// readModule returns, for every directory of the module holding Go
// files (test files left out, as they are no one's dependency), the
// directories of the module it imports.
func readModule(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || n == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if _, ok := pkgs[name]; !ok {
			pkgs[name] = nil
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(ip, modulePath); ok && !slices.Contains(pkgs[name], dep) {
				pkgs[name] = append(pkgs[name], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// folder is the folder a package is filed in, as one reads the tree:
// internal/store/sqlite is in internal/store, cmd/boxbroker in cmd.
func folder(pkg string) string {
	parts := strings.Split(pkg, "/")
	if parts[0] == "internal" && len(parts) > 1 {
		return "internal/" + parts[1]
	}
	return parts[0]
}

// TestImports_Layers holds the import graph to its layers, read from
// the source: every package of the module is in one layer, imports only
// packages of its layer or below, and no folder reaches itself again
// through its imports (a test helper filed beside a ground-floor package
// that imports the whole server would: cloud/cloudtest once did).
func TestImports_Layers(t *testing.T) {
	pkgs := readModule(t)
	layerOf := map[string]int{}
	for i, l := range layers {
		for _, p := range l.pkgs {
			if _, ok := layerOf[p]; ok {
				t.Errorf("%s is in two layers", p)
			}
			layerOf[p] = i
			if _, ok := pkgs[p]; !ok {
				t.Errorf("layer %q names %s, which holds no Go package: take it out", l.name, p)
			}
		}
	}
	for p, imports := range pkgs {
		lp, ok := layerOf[p]
		if !ok {
			t.Errorf("%s is in no layer: place it in this test's layers and in docs/architecture.md", p)
			continue
		}
		for _, d := range imports {
			if ld, ok := layerOf[d]; ok && ld > lp {
				t.Errorf("%s (%s) imports %s (%s), a layer above it", p, layers[lp].name, d, layers[ld].name)
			}
		}
	}
	// Folders: no cycle.
	edges := map[string]map[string]bool{}
	for p, imports := range pkgs {
		for _, d := range imports {
			if fp, fd := folder(p), folder(d); fp != fd {
				if edges[fp] == nil {
					edges[fp] = map[string]bool{}
				}
				edges[fp][fd] = true
			}
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(string)
	visit = func(f string) {
		state[f] = open
		stack = append(stack, f)
		for d := range edges[f] {
			switch state[d] {
			case open:
				i := slices.Index(stack, d)
				t.Errorf("folders import each other in a circle: %s", strings.Join(append(slices.Clone(stack[i:]), d), " -> "))
			case unseen:
				visit(d)
			}
		}
		stack = stack[:len(stack)-1]
		state[f] = done
	}
	var folders []string
	for f := range edges {
		folders = append(folders, f)
	}
	slices.Sort(folders)
	for _, f := range folders {
		if state[f] == unseen {
			visit(f)
		}
	}
}
