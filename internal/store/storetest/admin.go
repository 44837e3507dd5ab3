package storetest

import (
	"testing"

	"github.com/intentius/boxbroker/internal/store"
)

func testAdminTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := store.AdminToken{ID: "adm-1", Hash: hash("admin-one"), Name: "laptop", CreatedAt: at(1)}
	second := store.AdminToken{ID: "adm-2", Hash: hash("admin-two"), Name: "", CreatedAt: at(2)}
	seq := lastChange(t, s)
	for _, tok := range []store.AdminToken{second, first} {
		if err := s.CreateAdminToken(ctx, tok); err != nil {
			t.Fatalf("CreateAdminToken(%q) = %v, want nil", tok.ID, err)
		}
	}
	noChange(t, s, "CreateAdminToken", seq)

	for _, want := range []store.AdminToken{first, second} {
		got, err := s.AdminTokenByHash(ctx, want.Hash)
		if err != nil {
			t.Fatalf("AdminTokenByHash(%q) = %v, want nil", want.Hash, err)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("AdminTokenByHash(%q) mismatch (-want +got):\n%s", want.Hash, d)
		}
		got, err = s.AdminToken(ctx, want.ID)
		if err != nil {
			t.Fatalf("AdminToken(%q) = %v, want nil", want.ID, err)
		}
		if d := diff(want, got); d != "" {
			t.Errorf("AdminToken(%q) mismatch (-want +got):\n%s", want.ID, d)
		}
	}

	tests := []struct {
		name string
		tok  store.AdminToken
	}{
		{"same ID", store.AdminToken{ID: "adm-1", Hash: hash("other"), CreatedAt: at(3)}},
		{"same hash", store.AdminToken{ID: "adm-3", Hash: first.Hash, CreatedAt: at(3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, "CreateAdminToken("+tt.tok.ID+")", s.CreateAdminToken(ctx, tt.tok), store.ErrExists)
		})
	}

	list, err := s.ListAdminTokens(ctx)
	if err != nil {
		t.Fatalf("ListAdminTokens() = %v, want nil", err)
	}
	wantList := []store.AdminToken{
		{ID: "adm-1", Name: "laptop", CreatedAt: at(1)},
		{ID: "adm-2", CreatedAt: at(2)},
	}
	if d := diff(wantList, list); d != "" {
		t.Errorf("ListAdminTokens() mismatch, want oldest first with no hash (-want +got):\n%s", d)
	}

	if err := s.DeleteAdminToken(ctx, "adm-1"); err != nil {
		t.Fatalf("DeleteAdminToken(adm-1) = %v, want nil", err)
	}
	_, err = s.AdminTokenByHash(ctx, first.Hash)
	wantErr(t, "AdminTokenByHash(deleted)", err, store.ErrNotFound)
	_, err = s.AdminToken(ctx, "adm-1")
	wantErr(t, "AdminToken(deleted)", err, store.ErrNotFound)
	wantErr(t, "DeleteAdminToken(adm-1) again", s.DeleteAdminToken(ctx, "adm-1"), store.ErrNotFound)
	if list, err := s.ListAdminTokens(ctx); err != nil || len(list) != 1 || list[0].ID != "adm-2" {
		t.Errorf("ListAdminTokens() after delete = %v, %v, want only adm-2", list, err)
	}
}
