// Package protocol holds the Broker Protocol, version 1, in one place: its
// wire types, its limits, the declaration report parser, the refusal
// messages and body, and the payer and grant header forms.
//
// Every other package takes these rules from here and never restates them.
// The package is pure: no I/O beyond writing a refusal to an
// http.ResponseWriter, no clock except the one a caller passes.
package protocol

import (
	"regexp"
	"unicode/utf16"
)

// Limits of version 1 (the specification's "Reporting the declaration" and
// broker-protocol.schema.json).
const (
	// DeclarationMaxBytes bounds a declaration report's body; a larger one is a 413.
	DeclarationMaxBytes = 32 << 10
	// MaxCapabilities bounds a report's entries, counted before any is dropped or merged.
	MaxCapabilities = 20
	// MaxScopeWords bounds one entry's scope, counted before de-duplication.
	MaxScopeWords = 50
	// MaxScopeWordLen bounds a scope word, in UTF-16 code units.
	MaxScopeWordLen = 64
	// MaxTitleLen bounds a listing's title, in UTF-16 code units.
	MaxTitleLen = 60
	// MaxLineLen bounds a listing's line, in UTF-16 code units.
	MaxLineLen = 140
	// MaxPrincipals bounds a spend's byPrincipal.
	MaxPrincipals = 50
	// MaxPrincipalLen bounds a principal, in UTF-16 code units.
	MaxPrincipalLen = 200
	// SpendFigureBound is the exclusive upper bound of every spend figure.
	SpendFigureBound = 1e9
	// MaxGrantLen bounds a chant-grant value.
	MaxGrantLen = 2048
	// DefaultMaxBody bounds a request body the broker forwards to a
	// model or Fountain upstream, when the operator sets no other bound
	// (--max-body); a larger body is refused with a 413.
	DefaultMaxBody = 64 << 20
)

// Routes of version 1, relative to the broker's base URL.
const (
	RouteDeclaration = "/api/box/declaration"
	RouteFeedback    = "/api/feedback"
	PrefixAnthropic  = "/llm/anthropic"
	PrefixDecide     = "/decide"
	RouteDecide      = "/decide/v1/systemone"
	PrefixEgress     = "/egress"
	PrefixFountain   = "/fountain"
)

// Header names of version 1.
const (
	HeaderPayer = "Chant-Payer"
	HeaderGrant = "Chant-Grant"
)

// Standard capability names.
const (
	Inference = "inference"
	Egress    = "egress"
	Feedback  = "feedback"
	Fountain  = "fountain"
)

var (
	capabilityNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	secretNameRE     = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,39}$`)
	boxNameRE        = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	monthRE          = regexp.MustCompile(`^\d{4}-(0[1-9]|1[0-2])$`)
)

// IsCapabilityName reports whether s is a capability name: ^[a-z][a-z0-9-]{0,62}$.
func IsCapabilityName(s string) bool { return capabilityNameRE.MatchString(s) }

// IsSecretName reports whether s is an egress secret's name: ^[A-Z][A-Z0-9_]{0,39}$.
func IsSecretName(s string) bool { return secretNameRE.MatchString(s) }

// IsBoxName reports whether s is a box name: ^[a-z][a-z0-9-]{0,62}$.
func IsBoxName(s string) bool { return boxNameRE.MatchString(s) }

// IsMonth reports whether s is a month as YYYY-MM.
func IsMonth(s string) bool { return monthRE.MatchString(s) }

// jsLen is the length of s in UTF-16 code units, as JavaScript's String
// length counts it; chant measures every bound of the protocol that way.
func jsLen(s string) int {
	n := 0
	for _, r := range s {
		// Ranging over a string yields valid runes or U+FFFD, so RuneLen is 1 or 2.
		n += utf16.RuneLen(r)
	}
	return n
}
