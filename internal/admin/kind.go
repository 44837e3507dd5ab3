package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
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
// both `boxbroker credential set|add`, `box payer … owner` and `visitor
// set` on the store and the admin API's PUTs make before sealing. It
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

// checkKind refuses, as a 400 naming member, a kind that is not one of
// cloud.Kinds.
func checkKind(member, kind string) error {
	if kind == "" || slices.Contains(cloud.Kinds, kind) {
		return nil
	}
	return operator.Errorf(operator.Invalid, "%s is one of %s (absent is %s).",
		member, strings.Join(cloud.Kinds, ", "), cloud.KindAnthropic)
}

// isCloud reports whether kind is a cloud account's.
func isCloud(kind string) bool { return kind == cloud.KindBedrock || kind == cloud.KindVertex }

// checkedValue checks *value as a credential of kind (checked by
// checkKind) with CheckCredential, and returns the plaintext to seal,
// which the caller zeroes, and *value cleared. An anthropic value is
// first held to CheckValue; a cloud account's JSON to the body's bound
// only. A refusal names the member at fault, never any of the value.
func checkedValue(member, kind string, value *string) ([]byte, error) {
	if !isCloud(kind) {
		if err := CheckValue("credential", *value); err != nil {
			*value = ""
			return nil, err
		}
	} else if *value == "" {
		return nil, operator.Errorf(operator.Invalid,
			"The credential's value is empty: give the %s account's JSON, as docs/cloud.md shows.", kind)
	}
	raw := []byte(*value)
	*value = ""
	plain, err := CheckCredential(kind, raw)
	if err != nil {
		secrets.Zero(raw)
		what := "The credential's value is refused"
		if isCloud(kind) {
			what = fmt.Sprintf("The credential's value is not a %s account the broker takes", kind)
		}
		// cloud.Check says --kind, as the CLI takes it; here it is a member.
		msg := strings.ReplaceAll(err.Error(), "--kind", member)
		return nil, operator.Errorf(operator.Invalid, "%s: %s.", what, msg)
	}
	if isCloud(kind) {
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

// storedKind reads the credential id and opens it to say its kind
// (CredentialKind): "" when it does not open, or is gone.
func (s *Server) storedKind(ctx context.Context, id string) (string, error) {
	c, err := s.cfg.Store.Credential(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", operator.StoreError(err, "", "")
	}
	v, err := s.cfg.Keyring.Open(c.Sealed, payer.AD(id))
	if err != nil {
		return "", nil
	}
	defer secrets.Zero(v)
	return CredentialKind(id, v), nil
}
