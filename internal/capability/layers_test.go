package capability_test

import (
	"go/ast"
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
		"internal/protocol", "internal/jsonfield", "internal/secrets", "internal/metrics", "internal/filelock", "internal/filelock/filelocktest",
		"internal/cloud", "internal/cloud/cloudtest", "internal/store", "internal/store/migrations", "internal/upstreamtest", "internal/clocktest",
		"internal/telemetry", "internal/sso", "internal/sso/ssotest", "internal/webhook", "internal/defaults", "internal/quiet", "internal/hold", "internal/linefile", "client", "conformance",
	}},
	{"storage: the stores", []string{
		"internal/store/sqlstore", "internal/store/sqlite", "internal/store/postgres", "internal/store/deadline",
		"internal/store/storetest", "internal/store/sqlite/sqlitetest", "internal/store/postgres/postgrestest",
	}},
	{"parts: what a call is made of", []string{
		"internal/capability", "internal/token", "internal/cache", "internal/rule", "internal/grant", "internal/mint",
		"internal/proxy", "internal/pool", "internal/payer", "internal/spend", "internal/outbox", "internal/outbox/internal/diskfull", "internal/outbox/outboxtest", "internal/auditsink",
		"internal/ratelimit", "internal/approval", "internal/proxyca", "internal/operator",
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

// sourcePackage is one package of the module, as its source (test
// files left out, as they are no one's dependency) says: the packages of
// the module it imports, and the method names of each type it declares.
type sourcePackage struct {
	imports []string            // module-relative, e.g. "internal/broker"
	methods map[string][]string // receiver type name → method names
}

// readModule reads every directory of the module holding Go files, by
// its module-relative name ("internal/broker", "cmd/boxbroker"): the one
// walk over the source that TestImports_Layers and
// TestImports_PointOneWay read the import graph from.
func readModule(t *testing.T) map[string]*sourcePackage {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*sourcePackage{}
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
			p = &sourcePackage{methods: map[string][]string{}}
			pkgs[name] = p
		}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(ip, modulePath); ok && !slices.Contains(p.imports, dep) {
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
	for p, sp := range pkgs {
		lp, ok := layerOf[p]
		if !ok {
			t.Errorf("%s is in no layer: place it in this test's layers and in docs/architecture.md", p)
			continue
		}
		for _, d := range sp.imports {
			if ld, ok := layerOf[d]; ok && ld > lp {
				t.Errorf("%s (%s) imports %s (%s), a layer above it", p, layers[lp].name, d, layers[ld].name)
			}
		}
	}
	// Folders: no cycle.
	edges := map[string]map[string]bool{}
	for p, sp := range pkgs {
		for _, d := range sp.imports {
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
