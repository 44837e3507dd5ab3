package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// A box's token bound to where the box runs, and its lifetimes: the
// rules every door (the admin API, the owner's page, the CLI with its
// store or over --admin-url) applies alike.

// ParseFrom reads the source CIDRs a box's token is bound to, as the
// admin API takes them (a list) or the CLI (one comma-separated
// string, split first): nil for none or "any". The error is a 400 that
// names the entry.
func ParseFrom(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range list {
		if strings.EqualFold(strings.TrimSpace(v), "any") && len(list) == 1 {
			return nil, nil
		}
		p, err := store.ParseFrom(v)
		if err != nil {
			return nil, capability.Errorf(http.StatusBadRequest, protocol.TypeInvalid, "%s: give CIDRs such as 10.20.0.0/16, or single addresses.", err)
		}
		out = append(out, p...)
	}
	return out, nil
}

// ParseLifetime reads a token's TTL or a rotation's grace, a Go duration
// such as "720h" ("" is 0); what names the field for the 400.
func ParseLifetime(what, v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return 0, capability.Errorf(http.StatusBadRequest, protocol.TypeInvalid, "The %s %q is not a duration such as 1h or 720h.", what, v)
	}
	return d, nil
}

// Rotation is the store.Rotation that replaces b's token with the one
// hashing to hash at now: the box's tokens are given ttl from now on
// (nil: the TTL b has), and the old token is kept for grace (0: not at
// all).
func Rotation(b store.Box, hash string, now time.Time, ttl *time.Duration, grace time.Duration) store.Rotation {
	r := store.Rotation{Hash: hash, TTL: b.TokenTTL}
	if ttl != nil {
		r.TTL = *ttl
	}
	if r.TTL > 0 {
		r.ExpiresAt = now.Add(r.TTL).UTC()
	}
	if grace > 0 {
		r.GraceUntil = now.Add(grace).UTC()
	}
	return r
}

// DescribeFrom says where a box's token is taken from, in words.
func DescribeFrom(from []netip.Prefix) string {
	if len(from) == 0 {
		return "any address"
	}
	return store.FormatFrom(from)
}

// BindBox binds the token of the box named name to from (nil: any
// address), drops what the cache holds of it and waits until every
// replica judges by the binding (Changed), and logs it; the caller
// records it in the audit log (BoundMessage says what was done). A box
// that does not exist is a 404.
func (s *Server) BindBox(ctx context.Context, name string, from []netip.Prefix) error {
	if err := s.cfg.Store.BindBox(ctx, name, from); err != nil {
		return StoreError(err, fmt.Sprintf("There is no box named %s.", name), "")
	}
	if err := s.Changed(ctx, store.ChangeBox, name); err != nil {
		return err
	}
	s.log.Info("admin: box bound", "box", name, "from", DescribeFrom(from))
	return nil
}

// BoundMessage is the audit log's message for binding a box to from.
func BoundMessage(from []netip.Prefix) string {
	return "bound the box's token to " + DescribeFrom(from)
}

// Audit records an action an admin took on box, through route, answered
// with status, in the audit log: an entry whose Capability is
// store.ActorAdmin, its message what was done (never a token or a
// value).
func (s *Server) Audit(ctx context.Context, box, method, route string, status int, message string) error {
	e := store.AuditEntry{Box: box, At: s.cfg.Now().UTC(), Method: method, Route: route,
		Capability: store.ActorAdmin, Status: status, Message: message}
	if err := s.cfg.Store.AddAudit(ctx, []store.AuditEntry{e}); err != nil {
		return fmt.Errorf("audit %q on box %s: %w", route, box, err)
	}
	return nil
}

// optionalTime is t as the admin API writes it: null for the zero time.
func optionalTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	v := formatTime(t)
	return &v
}
