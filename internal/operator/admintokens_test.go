package operator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// TestService_AdminTokens makes, lists and revokes an admin token: the
// list never holds its value, each action writes its audit row, a second
// revocation is NotFound, and a token's value given as its ID is refused
// without being repeated.
func TestService_AdminTokens(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := context.Background()
	tok, v, err := svc.MintAdminToken(ctx, "laptop", store.AdminOperator)
	if err != nil || tok == "" || !strings.HasPrefix(v.ID, "adm-") || v.Name != "laptop" || v.Role != "operator" {
		t.Fatalf("MintAdminToken = %q, %+v, %v", tok, v, err)
	}
	list, err := svc.AdminTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID != v.ID || strings.Contains(list[0].ID+list[0].Name, tok) {
		t.Errorf("AdminTokens = %+v, %v, want %s alone", list, err, v.ID)
	}
	if err := svc.RevokeAdminToken(ctx, tok); operator.CodeOf(err) != operator.Invalid || strings.Contains(err.Error(), tok) {
		t.Errorf("RevokeAdminToken(its value) = %v, want Invalid, not repeating it", err)
	}
	if err := svc.RevokeAdminToken(ctx, v.ID); err != nil {
		t.Fatalf("RevokeAdminToken = %v", err)
	}
	if err := svc.RevokeAdminToken(ctx, v.ID); operator.CodeOf(err) != operator.NotFound {
		t.Errorf("RevokeAdminToken again = %v, want NotFound", err)
	}
	if _, _, err := svc.MintAdminToken(ctx, "bad\nname", store.AdminOperator); operator.CodeOf(err) != operator.Invalid {
		t.Errorf("MintAdminToken(control character) = %v, want Invalid", err)
	}
	for _, role := range []store.AdminRole{"", "admin"} {
		if _, _, err := svc.MintAdminToken(ctx, "r", role); operator.CodeOf(err) != operator.Invalid {
			t.Errorf("MintAdminToken(role %q) = %v, want Invalid", role, err)
		}
	}
	rows, err := st.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil || len(rows) != 2 || rows[0].Message != "revoked admin token "+v.ID || rows[1].Message != "made admin token "+v.ID {
		t.Errorf("audit = %+v, %v, want made then revoked %s", rows, err, v.ID)
	}
}

// TestService_ViewerAdminToken: a viewer's token is kept and listed with
// its role, and its audit row says it reads only.
func TestService_ViewerAdminToken(t *testing.T) {
	svc, st, _ := newService(t)
	ctx := context.Background()
	_, v, err := svc.MintAdminToken(ctx, "dashboard", store.AdminViewer)
	if err != nil || v.Role != "viewer" {
		t.Fatalf("MintAdminToken(viewer) = %+v, %v, want role viewer", v, err)
	}
	if kept, err := st.AdminToken(ctx, v.ID); err != nil || kept.Role != store.AdminViewer {
		t.Errorf("the store keeps %+v, %v, want role viewer", kept, err)
	}
	if list, err := svc.AdminTokens(ctx); err != nil || len(list) != 1 || list[0].Role != "viewer" {
		t.Errorf("AdminTokens = %+v, %v, want the viewer's token marked so", list, err)
	}
	rows, err := st.ListAudit(ctx, store.AuditQuery{Limit: 10})
	if err != nil || len(rows) != 1 || rows[0].Message != "made admin token "+v.ID+" (a viewer's: it reads only)" {
		t.Errorf("audit = %+v, %v, want it made as a viewer's", rows, err)
	}
}
