package admin_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// docRoute writes a route as the docs and the route table can both be
// compared by: its method and path, each wildcard ({name}, BOX,
// secret:NAME) written {}, without a query.
func docRoute(method, path string) string {
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") || strings.ContainsAny(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			segs[i] = "{}"
		}
	}
	return method + " " + strings.Join(segs, "/")
}

// TestDocs_AdminRoutesAreTheTable: every admin API route the docs name
// (README.md, docs/*.md) is one the admin API serves, and every route it
// serves is named in the docs, so the docs are the whole API and nothing
// more.
func TestDocs_AdminRoutesAreTheTable(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	served := map[string]bool{}
	for _, rt := range b.Server.Admin.Routes() {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		served[docRoute(method, path)] = true
	}
	root := filepath.Join("..", "..")
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(root, "README.md"))
	named := map[string]string{} // route → a document naming it
	re := regexp.MustCompile("((?:GET|HEAD|POST|PUT|PATCH|DELETE)(?:\\|(?:GET|HEAD|POST|PUT|PATCH|DELETE))*)`?(?:,? *`?(?:and|or)?`?)?\\s+(/(?:api/|healthz|readyz|metrics)[^\\s`|),;]*)")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			path := strings.TrimRight(m[2], ".:…")
			for _, method := range strings.Split(m[1], "|") {
				named[docRoute(method, path)] = filepath.Base(p)
			}
		}
	}
	// The box-facing routes under /api are the broker's, not the admin
	// API's.
	boxFacing := []string{"/api/box/declaration", "/api/feedback", "/api/hello"}
	documented := map[string]bool{}
	for r, doc := range named {
		if _, path, _ := strings.Cut(r, " "); slices.Contains(boxFacing, path) {
			continue
		}
		found := false
		for s := range served {
			if routeMatches(s, r) {
				found, documented[s] = true, true
			}
		}
		if !found {
			t.Errorf("%s names %s, which the admin API does not serve", doc, r)
		}
	}
	for r := range served {
		if !documented[r] {
			t.Errorf("the admin API serves %s, which no document names", r)
		}
	}
}

// routeMatches reports whether the route a document names (its wildcards
// written {}, or a value in their place, as PUT /api/credentials/anthropic)
// is the served route pattern.
func routeMatches(pattern, named string) bool {
	p, n := strings.Split(pattern, "/"), strings.Split(named, "/")
	if len(p) != len(n) {
		return false
	}
	for i := range p {
		if p[i] != n[i] && p[i] != "{}" {
			return false
		}
	}
	return true
}
