package operator_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// TestService_SetSecretRules: rules and rate set alone keep the secret's
// sealed value, host and body fields, tell the cache, and are audited;
// a bad rule and a secret that is not there are refused with their codes.
func TestService_SetSecretRules(t *testing.T) {
	svc, st, c := newService(t)
	ctx := context.Background()
	if _, err := svc.AddBox(ctx, operator.NewBox{Name: "alpha"}); err != nil {
		t.Fatal(err)
	}
	held := store.Secret{Box: "alpha", Name: "GITHUB", Host: "https://api.github.com", Sealed: []byte("sealed"), BodyFields: []string{"token"}, UpdatedAt: time.Now()}
	if err := st.SetSecret(ctx, held); err != nil {
		t.Fatal(err)
	}
	v, err := svc.SetSecretRules(ctx, "alpha", "GITHUB", []string{"GET /repos/acme/**"}, "60/m")
	if err != nil {
		t.Fatal(err)
	}
	if v.Host != held.Host || !slices.Equal(v.Rules, []string{"GET /repos/acme/**"}) || v.Rate != "60/m" {
		t.Errorf("SetSecretRules = %+v", v)
	}
	got, err := st.Secret(ctx, "alpha", "GITHUB")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Sealed) != "sealed" || got.Host != held.Host || !slices.Equal(got.BodyFields, held.BodyFields) || got.Rate != "60/m" || len(got.Rules) != 1 {
		t.Errorf("stored secret = %+v; want its value, host and body fields kept, the rules and rate set", got)
	}
	if !slices.Contains(c.dropped, store.ChangeSecret+" alpha/GITHUB") {
		t.Errorf("cache drops = %q, want the secret's", c.dropped)
	}
	rows, err := st.ListAudit(ctx, store.AuditQuery{Box: "alpha", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rows, func(e store.AuditEntry) bool { return strings.Contains(e.Message, "GET /repos/acme/**") }) {
		t.Errorf("audit rows %+v; want one naming the rules", rows)
	}
	for _, tt := range []struct {
		name, secret, rule string
		want               operator.Code
	}{
		{"a bad rule", "GITHUB", "GET no-slash", operator.Invalid},
		{"no such secret", "STRIPE", "GET /x", operator.NotFound},
		{"a bad name", "github", "GET /x", operator.Invalid},
	} {
		var oe *operator.Error
		if _, err := svc.SetSecretRules(ctx, "alpha", tt.secret, []string{tt.rule}, ""); !errors.As(err, &oe) || oe.Code != tt.want {
			t.Errorf("%s: SetSecretRules = %v, want code %d", tt.name, err, tt.want)
		}
	}
}
