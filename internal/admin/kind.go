package admin

import "github.com/intentius/boxbroker/internal/operator"

// The credential checks are the operator service's (operator.CheckCredential).
var (
	// ErrCredentialKind is CheckCredential's error for a kind it does not know.
	ErrCredentialKind = operator.ErrCredentialKind
	// CheckCredential checks a credential's value of a kind before sealing.
	CheckCredential = operator.CheckCredential
	// CredentialKind says what kind of credential a plaintext value is.
	CredentialKind = operator.CredentialKind

	checkKind    = operator.CheckKind
	checkedValue = operator.CheckedValue
	isCloud      = operator.IsCloud
)
