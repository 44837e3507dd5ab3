package server

import (
	"strings"
	"testing"
)

// TestStoreWhere_ShowsNoPassword: what serve prints of where its store
// is holds no password, wherever the PostgreSQL URL carries it: in its
// user information (an @ in the password included) or in a query
// parameter, which pgx also reads.
func TestStoreWhere_ShowsNoPassword(t *testing.T) {
	for _, tt := range []struct{ store, want string }{
		{"postgres://bb:hunter2secret@db.example:5432/bb", "postgres://…@db.example:5432/bb"},
		{"postgres://bb:hun@ter2secret@db.example/bb", "postgres://…@db.example/bb"},
		{"postgresql://db.example/bb?sslmode=require&password=hunter2secret", "postgresql://db.example/bb?password=xxxxx&sslmode=require"},
		{"postgres://bb@db.example/bb?sslpassword=hunter2secret", "postgres://…@db.example/bb?sslpassword=xxxxx"},
		{"postgres://db.example/bb", "postgres://db.example/bb"},
	} {
		got := StoreWhere(&Config{Store: tt.store})
		if strings.Contains(got, "hunter2") || strings.Contains(got, "ter2secret") {
			t.Errorf("StoreWhere(%q) = %q: it shows the password", tt.store, got)
		}
		if got != tt.want {
			t.Errorf("StoreWhere(%q) = %q, want %q", tt.store, got, tt.want)
		}
	}
}
