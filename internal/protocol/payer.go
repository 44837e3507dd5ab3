package protocol

import (
	"errors"
	"strings"
)

// Payer kinds.
const (
	PayerShared  = "shared"
	PayerOwner   = "owner"
	PayerVisitor = "visitor"
)

// Payer says whose credential pays for a box's model calls. Principal is nil
// when the broker does not know who pays.
type Payer struct {
	Kind      string  `json:"kind"`
	Principal *string `json:"principal"`
}

// SharedPayer is the operator's shared credential with no principal.
func SharedPayer() Payer { return Payer{Kind: PayerShared} }

// ErrBadPayer is returned by ParsePayerHeader for a value that is no payer.
var ErrBadPayer = errors.New("not a payer")

// IsPayerKind reports whether kind is shared, owner or visitor.
func IsPayerKind(kind string) bool {
	return kind == PayerShared || kind == PayerOwner || kind == PayerVisitor
}

// IsPrincipal reports whether p can be a payer's principal: 1 to 200
// characters with no white space, as the schema's ^[^\s]+$ reads it.
func IsPrincipal(p string) bool {
	n := jsLen(p)
	return n >= 1 && n <= MaxPrincipalLen && strings.IndexFunc(p, isSpace) < 0
}

// isSpace reports whether r is white space as JavaScript's \s matches it
// (ECMA-262's WhiteSpace and LineTerminator), which the schema's patterns
// are written in: unlike Go's unicode.IsSpace, it holds U+FEFF and not
// U+0085.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xA0:
		return true
	}
	return r >= 0x2000 && r <= 0x200a || r == 0x1680 || r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000 || r == 0xfeff
}

// FormatPayerHeader writes p as the chant-payer header: "<kind>" or
// "<kind> <principal>".
func FormatPayerHeader(p Payer) string {
	if p.Principal == nil {
		return p.Kind
	}
	return p.Kind + " " + *p.Principal
}

// ParsePayerHeader reads a chant-payer header value. It returns ErrBadPayer
// for anything that is not "<kind>" or "<kind> <principal>".
func ParsePayerHeader(v string) (Payer, error) {
	kind, principal, hasPrincipal := strings.Cut(v, " ")
	if !IsPayerKind(kind) {
		return Payer{}, ErrBadPayer
	}
	if !hasPrincipal {
		return Payer{Kind: kind}, nil
	}
	if !IsPrincipal(principal) {
		return Payer{}, ErrBadPayer
	}
	return Payer{Kind: kind, Principal: &principal}, nil
}

// IsGrantValue reports whether v can be a chant-grant value: 1 to 2048
// printable ASCII characters with no spaces.
func IsGrantValue(v string) bool {
	if len(v) == 0 || len(v) > MaxGrantLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return false
		}
	}
	return true
}
