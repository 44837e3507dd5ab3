package operator

import (
	"context"
	"errors"
	"net/http"

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

// PayerView is the answer to PUT /api/boxes/{name}/payer: the box, whose
// payer is the new one, and CredentialRemoved, true when the change
// removed an owner's credential the box held (switching to shared from
// an owner who had one); false when there was none to remove.
type PayerView struct {
	BoxView
	CredentialRemoved bool `json:"credentialRemoved"`
}

// SetPayer sets who pays for box's calls (payer.Set): shared, or its
// owner with the owner's credential in ps, checked (CheckedValue) and
// sealed as owner:<box>; switching to shared removes that credential,
// and the answer says whether there was one. The value is cleared.
// Invalid for a bad kind, principal or value; NotFound for no such box.
func (s *Service) SetPayer(ctx context.Context, name string, ps PayerSetting) (PayerView, error) {
	defer func() { ps.Value = "" }()
	if err := CheckBoxName(name); err != nil {
		return PayerView{}, err
	}
	choice := payer.Choice{Kind: ps.Kind}
	if ps.Principal != nil {
		choice.Principal = *ps.Principal
	}
	if err := CheckKind("credentialKind", ps.CredentialKind); err != nil {
		return PayerView{}, err
	}
	switch {
	case ps.Kind == protocol.PayerShared && ps.Value != "":
		return PayerView{}, Errorf(Invalid,
			"A shared payer takes no value: the operator's credential pays (PUT /api/credentials/anthropic sets it).")
	case ps.Kind == protocol.PayerShared && ps.CredentialKind != "":
		return PayerView{}, Errorf(Invalid,
			"credentialKind is the owner's credential's; a shared payer has none.")
	case ps.Kind == protocol.PayerOwner && ps.Value == "":
		return PayerView{}, Errorf(Invalid,
			"An owner payer needs the owner's Anthropic key or setup token, or the cloud account's JSON with credentialKind, in value.")
	}
	kind := ""
	if ps.Kind == protocol.PayerOwner {
		plain, err := CheckedValue("credentialKind", ps.CredentialKind, &ps.Value)
		if err != nil {
			return PayerView{}, err
		}
		choice.Credential = plain
		kind = CredentialKind(payer.SharedAnthropic, plain)
	}
	if choice.Credential != nil && s.cfg.Keyring == nil {
		secrets.Zero(choice.Credential)
		return PayerView{}, errors.New("set an owner payer: the operator service has no keyring")
	}
	ch, err := payer.Set(ctx, s.cfg.Store, s.cfg.Keyring, name, choice, s.cfg.Now())
	secrets.Zero(choice.Credential)
	var refusal string
	switch {
	case errors.Is(err, payer.ErrKind):
		refusal = "A box's payer kind is shared or owner."
	case errors.Is(err, payer.ErrPrincipal):
		refusal = "The owner's principal is 1 to 200 characters with no white space, such as github:<login>."
	case errors.Is(err, payer.ErrSharedPrincipal):
		refusal = "A shared payer names no principal; only an owner does."
	case errors.Is(err, payer.ErrOwnerCredential):
		refusal = "An owner payer needs the owner's Anthropic key or setup token in value."
	}
	if refusal != "" {
		return PayerView{}, Errorf(Invalid, "%s", refusal)
	}
	if ch.CredentialSet || ch.CredentialRemoved {
		s.Drop(store.ChangeCredential, payer.OwnerAnthropic(name))
	}
	if err != nil {
		return PayerView{}, StoreError(err, NoBox(name), "")
	}
	msg := "set the box's payer to " + ch.Box.PayerKind
	if ch.Box.PayerPrincipal != "" {
		msg += " " + ch.Box.PayerPrincipal
	}
	switch {
	case ch.CredentialSet:
		msg += ", with the owner's credential (" + kind + ")"
	case ch.CredentialRemoved:
		msg += ", removing the owner's credential"
	}
	if err := s.wrote(ctx, store.ChangeBox, name, name, http.StatusOK, msg); err != nil {
		return PayerView{}, err
	}
	v, err := s.view(ctx, ch.Box)
	if err != nil {
		return PayerView{}, err
	}
	return PayerView{BoxView: v, CredentialRemoved: ch.CredentialRemoved}, nil
}
