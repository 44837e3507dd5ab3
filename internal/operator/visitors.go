package operator

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// VisitorView is a visitor holding a credential at the broker: the
// principal, the credential's kind (CredentialKind) and when it was set;
// never its value.
type VisitorView struct {
	Principal string `json:"principal"`
	Kind      string `json:"kind,omitempty"`
	UpdatedAt string `json:"updatedAt"`
}

// VisitorList answers GET /api/visitors, by principal.
type VisitorList struct {
	Visitors []VisitorView `json:"visitors"`
}

// checkPrincipal refuses a principal that could be none.
func checkPrincipal(p string) error {
	if !protocol.IsPrincipal(p) {
		return Errorf(Invalid, "A principal is 1 to 200 characters with no white space, such as github:<login>.")
	}
	return nil
}

// ListVisitors lists the visitors holding a credential, by principal,
// with each credential's kind (StoredKind); never a value.
func (s *Service) ListVisitors(ctx context.Context) ([]VisitorView, error) {
	creds, err := s.ListCredentials(ctx)
	out := []VisitorView{}
	for _, c := range creds {
		if p, ok := strings.CutPrefix(c.ID, payer.VisitorPrefix); ok {
			out = append(out, VisitorView{Principal: p, Kind: c.Kind, UpdatedAt: c.UpdatedAt})
		}
	}
	return out, err
}

// SetVisitor checks value as a credential of kind (CheckedValue), seals
// it as principal's visitor credential and stores it; the value is
// zeroed. Invalid for a bad principal, kind or value.
func (s *Service) SetVisitor(ctx context.Context, principal, kind string, value []byte) (VisitorView, error) {
	raw := string(value)
	secrets.Zero(value)
	if err := checkPrincipal(principal); err != nil {
		return VisitorView{}, err
	}
	if err := CheckKind("kind", kind); err != nil {
		return VisitorView{}, err
	}
	id := payer.VisitorAnthropic(principal)
	v, err := s.StoreCredential(ctx, id, kind, &raw)
	if err != nil {
		return VisitorView{}, err
	}
	what := v.Kind
	if err := s.done(ctx, "", http.StatusOK, "set visitor "+principal+"'s credential ("+what+")", "principal", principal); err != nil {
		return VisitorView{}, err
	}
	return VisitorView{Principal: principal, Kind: what, UpdatedAt: v.UpdatedAt}, nil
}

// RemoveVisitor removes principal's visitor credential; the grants it
// pays for stop paying at once. NotFound when principal holds none.
func (s *Service) RemoveVisitor(ctx context.Context, principal string) error {
	if err := checkPrincipal(principal); err != nil {
		return err
	}
	id := payer.VisitorAnthropic(principal)
	if err := s.cfg.Store.DeleteCredential(ctx, id); err != nil {
		return StoreError(err, fmt.Sprintf("%s holds no credential here.", principal), "")
	}
	s.Drop(store.ChangeCredential, id)
	return s.done(ctx, "", http.StatusNoContent, "removed visitor "+principal+"'s credential", "principal", principal)
}
