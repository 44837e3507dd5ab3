// Package rule is the protocol's rule, the one judgment every box
// request passes: a request that needs a scope word of a capability is
// served only when the box's last declaration report declares that word
// for that capability, brokered by this broker (protocol.DeclaredRefusal
// says how a report declares one). The broker applies it around every
// capability (package broker, for each request once the box's token is
// known; package egressproxy, for a CONNECT and an open tunnel), never
// inside one: a capability only says which words a request needs.
package rule

import (
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// Admission is a box admitted for one capability: its token was the
// box's, the box is not paused, and Report is its last declaration report
// (nil when it has sent none). The scope words a request needs are judged
// against it by Require.
type Admission struct {
	Box store.Box
	// TokenHash is the hash of the token the box was admitted with:
	// Box.TokenHash, or Box.OldTokenHash within a rotation's grace.
	TokenHash string
	Report    *protocol.Declaration
	// broker and capability are the broker word and the capability's
	// name the report is read for.
	broker     string
	capability string
}

// Admit returns the Admission of box for the capability named name at
// the broker whose word is broker; its Report is set by the caller once
// read.
func Admit(box store.Box, broker, name string) *Admission {
	return &Admission{Box: box, broker: broker, capability: name}
}

// Refusal is the rule's 403 of a request that needs word of a's
// capability, or nil when the box's report declares it.
func (a *Admission) Refusal(word string) *capability.Error {
	msg := protocol.DeclaredRefusal(a.Report, a.broker, a.capability, word)
	if msg == "" {
		return nil
	}
	return capability.Refuse(capability.ReasonDeclaration, "%s", msg)
}

// Require is the Refusal of the first of words the box's report does not
// declare, or nil when it declares them all.
func (a *Admission) Require(words []string) error {
	for _, word := range words {
		if e := a.Refusal(word); e != nil {
			return e
		}
	}
	return nil
}
