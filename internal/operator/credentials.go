package operator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
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
