package admin

import (
	"errors"
	"net/http"

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

// VisitorView is a visitor holding a credential (operator.VisitorView).
type VisitorView = operator.VisitorView

// VisitorList answers GET /api/visitors, by principal.
type VisitorList = operator.VisitorList

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

func (s *Server) listVisitors(w http.ResponseWriter, r *http.Request) error {
	vs, err := s.op.ListVisitors(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, VisitorList{Visitors: vs})
}

func (s *Server) setVisitor(w http.ResponseWriter, r *http.Request) error {
	var cv CredentialValue
	if err := readJSON(w, r, &cv); err != nil {
		return err
	}
	v, err := s.Op(r, 0).SetVisitor(r.Context(), r.PathValue("principal"), cv.Kind, []byte(cv.Value))
	cv.Value = ""
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeVisitor(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveVisitor(r.Context(), r.PathValue("principal")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
