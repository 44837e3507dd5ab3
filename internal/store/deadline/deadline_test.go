package deadline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

// TestEveryRequestPathMethodIsBounded: a method a new sub-interface adds
// to store.Store passes through Store unbounded unless deadline.go
// redefines it, and a store that stops answering then hangs the requests
// that call it. Every method is redefined here except those only the
// admin API and the CLI call (the owner's page's overview and charts) and Close.
func TestEveryRequestPathMethodIsBounded(t *testing.T) {
	exempt := map[string]bool{"Close": true}
	for _, admin := range []reflect.Type{reflect.TypeOf((*store.Overview)(nil)).Elem(), reflect.TypeOf((*store.AuditCosts)(nil)).Elem()} {
		for i := 0; i < admin.NumMethod(); i++ {
			exempt[admin.Method(i).Name] = true
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "deadline.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 {
			continue
		}
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "Store" {
				defined[fn.Name.Name] = true
			}
		}
	}
	st := reflect.TypeOf((*store.Store)(nil)).Elem()
	for i := 0; i < st.NumMethod(); i++ {
		name := st.Method(i).Name
		if !exempt[name] && !defined[name] {
			t.Errorf("store.Store's %s passes through deadline.Store unbounded: redefine it in deadline.go with do or do0", name)
		}
	}
}
