package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// PayerSetting is the body of PUT /api/boxes/{name}/payer: kind shared,
// or kind owner with the owner's principal (optional) and value, the
// owner's Anthropic credential (write-only: sealed as owner:<box> and
// never answered) of credentialKind, as CredentialValue's kind: anthropic
// (absent: an API key or setup token), bedrock or vertex (the cloud
// account's JSON).
type PayerSetting struct {
	Kind           string  `json:"kind"`
	Principal      *string `json:"principal,omitempty"`
	Value          string  `json:"value,omitempty"`
	CredentialKind string  `json:"credentialKind,omitempty"`
}

// VisitorView is a visitor holding a credential at the broker: the
// principal, the credential's kind (as CredentialView's) and when it was
// set; never its value.
type VisitorView struct {
	Principal string `json:"principal"`
	Kind      string `json:"kind,omitempty"`
	UpdatedAt string `json:"updatedAt"`
}

// VisitorList answers GET /api/visitors, by principal.
type VisitorList struct {
	Visitors []VisitorView `json:"visitors"`
}

// setPayer answers PUT /api/boxes/{name}/payer through payer.Set, as
// `boxbroker box payer` does.
func (s *Server) setPayer(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	var ps PayerSetting
	if err := readJSON(w, r, &ps); err != nil {
		return err
	}
	defer func() { ps.Value = "" }()
	choice := payer.Choice{Kind: ps.Kind}
	if ps.Principal != nil {
		choice.Principal = *ps.Principal
	}
	if err := checkKind("credentialKind", ps.CredentialKind); err != nil {
		return err
	}
	switch {
	case ps.Kind == protocol.PayerShared && ps.Value != "":
		return operator.Errorf(operator.Invalid,
			"A shared payer takes no value: the operator's credential pays (PUT /api/credentials/anthropic sets it).")
	case ps.Kind == protocol.PayerShared && ps.CredentialKind != "":
		return operator.Errorf(operator.Invalid,
			"credentialKind is the owner's credential's; a shared payer has none.")
	case ps.Kind == protocol.PayerOwner && ps.Value == "":
		return operator.Errorf(operator.Invalid,
			"An owner payer needs the owner's Anthropic key or setup token, or the cloud account's JSON with credentialKind, in value.")
	}
	kind := ""
	if ps.Kind == protocol.PayerOwner {
		plain, err := checkedValue("credentialKind", ps.CredentialKind, &ps.Value)
		if err != nil {
			return err
		}
		choice.Credential = plain
		kind = CredentialKind(payer.SharedAnthropic, plain)
	}
	ch, err := payer.Set(r.Context(), s.cfg.Store, s.cfg.Keyring, name, choice, s.cfg.Now())
	secrets.Zero(choice.Credential)
	var msg string
	switch {
	case errors.Is(err, payer.ErrKind):
		msg = "A box's payer kind is shared or owner."
	case errors.Is(err, payer.ErrPrincipal):
		msg = "The owner's principal is 1 to 200 characters with no white space, such as github:<login>."
	case errors.Is(err, payer.ErrSharedPrincipal):
		msg = "A shared payer names no principal; only an owner does."
	case errors.Is(err, payer.ErrOwnerCredential):
		msg = "An owner payer needs the owner's Anthropic key or setup token in value."
	}
	if msg != "" {
		return operator.Errorf(operator.Invalid, "%s", msg)
	}
	if ch.CredentialSet || ch.CredentialRemoved {
		s.Drop(store.ChangeCredential, payer.OwnerAnthropic(name))
	}
	if err != nil {
		return operator.StoreError(err, operator.NoBox(name), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBox, name); err != nil {
		return err
	}
	s.log.Info("admin: payer set", "box", name, "payer", ch.Box.PayerKind, "principal", ch.Box.PayerPrincipal,
		"credential_set", ch.CredentialSet, "credential_kind", kind, "credential_removed", ch.CredentialRemoved)
	v, err := s.boxView(r.Context(), ch.Box)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, v)
}

// visitorPrincipal checks the {principal} path value.
func visitorPrincipal(r *http.Request) (string, error) {
	p := r.PathValue("principal")
	if !protocol.IsPrincipal(p) {
		return "", operator.Errorf(operator.Invalid,
			"A principal is 1 to 200 characters with no white space, such as github:<login>.")
	}
	return p, nil
}

func (s *Server) listVisitors(w http.ResponseWriter, r *http.Request) error {
	creds, err := s.cfg.Store.ListCredentials(r.Context())
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := VisitorList{Visitors: []VisitorView{}}
	for _, c := range creds {
		if p, ok := strings.CutPrefix(c.ID, payer.VisitorPrefix); ok {
			kind, err := s.storedKind(r.Context(), c.ID)
			if err != nil {
				return err
			}
			out.Visitors = append(out.Visitors, VisitorView{Principal: p, Kind: kind, UpdatedAt: formatTime(c.UpdatedAt)})
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setVisitor(w http.ResponseWriter, r *http.Request) error {
	p, err := visitorPrincipal(r)
	if err != nil {
		return err
	}
	var cv CredentialValue
	if err := readJSON(w, r, &cv); err != nil {
		return err
	}
	defer func() { cv.Value = "" }()
	if err := checkKind("kind", cv.Kind); err != nil {
		return err
	}
	v, err := s.putCredential(r.Context(), payer.VisitorAnthropic(p), cv.Kind, &cv.Value)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, VisitorView{Principal: p, Kind: v.Kind, UpdatedAt: v.UpdatedAt})
}

func (s *Server) removeVisitor(w http.ResponseWriter, r *http.Request) error {
	p, err := visitorPrincipal(r)
	if err != nil {
		return err
	}
	id := payer.VisitorAnthropic(p)
	if err := s.cfg.Store.DeleteCredential(r.Context(), id); err != nil {
		return operator.StoreError(err, fmt.Sprintf("%s holds no credential here.", p), "")
	}
	s.Drop(store.ChangeCredential, id)
	s.log.Info("admin: visitor's credential removed", "principal", p)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
