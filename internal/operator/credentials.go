package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// ErrCredentialKind is CheckCredential's error for a kind that is not one
// of cloud.Kinds.
var ErrCredentialKind = fmt.Errorf("the credential's kind is one of %s", strings.Join(cloud.Kinds, ", "))

// CheckCredential checks value as an Anthropic credential of kind (one
// of cloud.Kinds; "" is cloud.KindAnthropic) and returns the plaintext to
// seal: for anthropic, value itself, which may not begin with "{" as a
// cloud account's JSON does (the broker would read it as one, unchecked);
// for bedrock or vertex, the form cloud.Check returns. It is the one check
// every front end makes before sealing. It
// returns ErrCredentialKind for a kind it does not know; for a value that
// is not one, an error that names what is at fault and holds none of
// value.
func CheckCredential(kind string, value []byte) ([]byte, error) {
	switch kind {
	case "", cloud.KindAnthropic:
		if cloud.Is(value) {
			return nil, errors.New("the value begins with \"{\", as a cloud account's JSON does and no Anthropic key or setup token does: give its kind, bedrock or vertex")
		}
		return value, nil
	case cloud.KindBedrock, cloud.KindVertex:
		return cloud.Check(kind, value)
	}
	return nil, ErrCredentialKind
}

// CheckKind refuses, as a 400 naming member, a kind that is not one of
// cloud.Kinds.
func CheckKind(member, kind string) error {
	if kind == "" || slices.Contains(cloud.Kinds, kind) {
		return nil
	}
	return Errorf(Invalid, "%s is one of %s (absent is %s).",
		member, strings.Join(cloud.Kinds, ", "), cloud.KindAnthropic)
}

// IsCloud reports whether kind is a cloud account's.
func IsCloud(kind string) bool { return kind == cloud.KindBedrock || kind == cloud.KindVertex }

// CheckedValue checks *value as a credential of kind (checked by
// CheckKind) with CheckCredential, and returns the plaintext to seal,
// which the caller zeroes, and *value cleared. An anthropic value is
// first held to CheckValue; a cloud account's JSON to the body's bound
// only. A refusal names the member at fault, never any of the value.
func CheckedValue(member, kind string, value *string) ([]byte, error) {
	if !IsCloud(kind) {
		if err := CheckValue("credential", *value); err != nil {
			*value = ""
			return nil, err
		}
	} else if *value == "" {
		return nil, Errorf(Invalid,
			"The credential's value is empty: give the %s account's JSON, as docs/cloud.md shows.", kind)
	}
	raw := []byte(*value)
	*value = ""
	plain, err := CheckCredential(kind, raw)
	if err != nil {
		secrets.Zero(raw)
		what := "The credential's value is refused"
		if IsCloud(kind) {
			what = fmt.Sprintf("The credential's value is not a %s account the broker takes", kind)
		}
		// cloud.Check says --kind, as the CLI takes it; here it is a member.
		msg := strings.ReplaceAll(err.Error(), "--kind", member)
		return nil, Errorf(Invalid, "%s: %s.", what, msg)
	}
	if IsCloud(kind) {
		secrets.Zero(raw) // plain is cloud.Check's own copy
	}
	return plain, nil
}

// CredentialKind says what kind of credential plaintext value is, without
// any of it: the fountain key is a bearer key; any other is an Anthropic
// credential, as pool.Kind says it (API key, setup token, Amazon Bedrock,
// Google Vertex AI).
func CredentialKind(id string, value []byte) string {
	if id == payer.SharedFountain {
		return "bearer key"
	}
	return pool.Kind(value)
}

// StoredKind reads the credential id and opens it to say its kind
// (CredentialKind): "" when it does not open, is gone, or the Service
// has no keyring.
func (s *Service) StoredKind(ctx context.Context, id string) (string, error) {
	c, err := s.cfg.Store.Credential(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", StoreError(err, "", "")
	}
	if s.cfg.Keyring == nil {
		return "", nil
	}
	v, err := s.cfg.Keyring.Open(c.Sealed, payer.AD(id))
	if err != nil {
		return "", nil
	}
	defer secrets.Zero(v)
	return CredentialKind(id, v), nil
}

// CredentialView is a credential's ID, its kind — "API key", "setup
// token", "Amazon Bedrock" or "Google Vertex AI" (an Anthropic
// credential, as pool entries say it), "bearer key" (the fountain key);
// "" when it does not open under the broker's master key — and when it
// was set; never its value.
type CredentialView struct {
	ID        string `json:"id"`
	Kind      string `json:"kind,omitempty"`
	UpdatedAt string `json:"updatedAt"`
}

// checkCredentialID refuses an ID that is none of anthropic, fountain,
// owner:<box> or visitor:<principal>.
func checkCredentialID(id string) error {
	switch {
	case id == payer.SharedAnthropic || id == payer.SharedFountain:
		return nil
	case strings.HasPrefix(id, "owner:") && protocol.IsBoxName(strings.TrimPrefix(id, "owner:")):
		return nil
	case strings.HasPrefix(id, payer.VisitorPrefix) && protocol.IsPrincipal(strings.TrimPrefix(id, payer.VisitorPrefix)):
		return nil
	}
	return Errorf(Invalid, "A credential ID is anthropic, fountain, owner:<box> or visitor:<principal>.")
}

// ListCredentials lists the credentials by ID with their kinds
// (StoredKind); never a value.
func (s *Service) ListCredentials(ctx context.Context) ([]CredentialView, error) {
	creds, err := s.cfg.Store.ListCredentials(ctx)
	if err != nil {
		return nil, StoreError(err, "", "")
	}
	out := []CredentialView{}
	for _, c := range creds {
		kind, err := s.StoredKind(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, CredentialView{ID: c.ID, Kind: kind, UpdatedAt: formatTime(c.UpdatedAt)})
	}
	return out, nil
}

// SetCredential checks value as a credential of kind (CheckedValue),
// seals it as the credential id and stores it; value is zeroed. It waits
// until the credential is in force on every replica (a visitor's is read
// from the store at each grant). Invalid for a bad ID, kind or value;
// NotFound for an owner:<box> of no box.
func (s *Service) SetCredential(ctx context.Context, id, kind string, value []byte) (CredentialView, error) {
	raw := string(value)
	secrets.Zero(value)
	if err := checkCredentialID(id); err != nil {
		return CredentialView{}, err
	}
	if err := CheckKind("kind", kind); err != nil {
		return CredentialView{}, err
	}
	if id == payer.SharedFountain && IsCloud(kind) {
		return CredentialView{}, Errorf(Invalid, "kind is for an Anthropic credential; the fountain key is a bearer key, with no kind.")
	}
	if box, ok := strings.CutPrefix(id, "owner:"); ok {
		if _, err := s.cfg.Store.Box(ctx, box); err != nil {
			return CredentialView{}, StoreError(err, NoBox(box), "")
		}
	}
	v, err := s.StoreCredential(ctx, id, kind, &raw)
	if err != nil {
		return CredentialView{}, err
	}
	if err := s.done(ctx, "", http.StatusOK, "set the "+id+" credential ("+v.Kind+")", "credential", id); err != nil {
		return CredentialView{}, err
	}
	return v, nil
}

// StoreCredential checks *value as a credential of kind (CheckedValue),
// seals it as the credential id, stores it, clears *value, and waits
// until it is in force on every replica (a visitor's is read from the
// store at each grant). It writes no audit row: its caller does.
func (s *Service) StoreCredential(ctx context.Context, id, kind string, value *string) (CredentialView, error) {
	sealed, what, err := s.seal(kind, value, "credential "+id, payer.AD(id), func(v []byte) string { return CredentialKind(id, v) })
	if err != nil {
		return CredentialView{}, err
	}
	c := store.Credential{ID: id, Sealed: sealed, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetCredential(ctx, c); err != nil {
		return CredentialView{}, StoreError(err, "", "")
	}
	if strings.HasPrefix(id, payer.VisitorPrefix) {
		s.Drop(store.ChangeCredential, id) // read from the store at each grant
	} else if err := s.Changed(ctx, store.ChangeCredential, id); err != nil {
		return CredentialView{}, err
	}
	return CredentialView{ID: id, Kind: what, UpdatedAt: formatTime(c.UpdatedAt)}, nil
}

// seal checks *value as a credential of kind (CheckedValue), clears it,
// and seals it under ad; it returns the sealed value and what describe
// says of the plain one. Its errors name the sealed value as what.
func (s *Service) seal(kind string, value *string, what, ad string, describe func([]byte) string) ([]byte, string, error) {
	plain, err := CheckedValue("kind", kind, value)
	if err != nil {
		return nil, "", err
	}
	defer secrets.Zero(plain)
	if s.cfg.Keyring == nil {
		return nil, "", fmt.Errorf("set %s: the operator service has no keyring", what)
	}
	sealed, err := s.cfg.Keyring.Seal(plain, ad)
	if err != nil {
		return nil, "", fmt.Errorf("seal %s: %w", what, err)
	}
	return sealed, describe(plain), nil
}

// RemoveCredential removes the credential id. NotFound when none is set.
func (s *Service) RemoveCredential(ctx context.Context, id string) error {
	if err := checkCredentialID(id); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteCredential(ctx, id); err != nil {
		return StoreError(err, fmt.Sprintf("No %s credential is set.", id), "")
	}
	return s.wrote(ctx, store.ChangeCredential, id, "", http.StatusNoContent, "removed the "+id+" credential", "credential", id)
}
