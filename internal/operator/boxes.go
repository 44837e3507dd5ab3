package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Boxes is the box actions, as both a Service and the admin API's client
// (package adminclient) take them: the CLI picks one of the two once and
// writes each box command over it.
type Boxes interface {
	// Box reads a box.
	Box(ctx context.Context, name string) (BoxView, error)
	// AddBox adds a box and mints its first token, shown this once.
	AddBox(ctx context.Context, nb NewBox) (BoxToken, error)
	// RotateBoxWith replaces a box's token, shown this once.
	RotateBoxWith(ctx context.Context, name string, tr TokenRotation) (BoxToken, error)
	// UpdateBox changes the settings present in set.
	UpdateBox(ctx context.Context, name string, set BoxSettings) (BoxView, error)
	// RemoveBox removes a box and all kept for it.
	RemoveBox(ctx context.Context, name string) error
	// EachBox calls fn with every box, by name, reading them limit at a
	// time, so that its memory does not grow with the fleet; it stops at
	// fn's first error and returns it.
	EachBox(ctx context.Context, limit int, fn func(BoxView) error) error
}

var _ Boxes = (*Service)(nil)

// AddBox adds the box nb names with a new token, which the answer shows
// this once. Invalid for a malformed name, from or TTL; Conflict when a
// box of that name exists.
func (s *Service) AddBox(ctx context.Context, nb NewBox) (BoxToken, error) {
	if err := CheckBoxName(nb.Name); err != nil {
		return BoxToken{}, err
	}
	from, err := ParseFrom(nb.From)
	if err != nil {
		return BoxToken{}, err
	}
	ttl, err := ParseLifetime("ttl", nb.TTL)
	if err != nil {
		return BoxToken{}, err
	}
	tok, err := token.NewBox()
	if err != nil {
		return BoxToken{}, err
	}
	now := s.cfg.Now().UTC()
	b := store.Box{Name: nb.Name, TokenHash: token.Hash(tok), CreatedAt: now,
		Consent: nb.Consent, Paused: nb.Paused, PayerKind: protocol.PayerShared, From: from, TokenTTL: ttl}
	if ttl > 0 {
		b.ExpiresAt = now.Add(ttl)
	}
	if err := s.cfg.Store.CreateBox(ctx, b); err != nil {
		return BoxToken{}, StoreError(err, "", fmt.Sprintf("A box named %s already exists; rotate its token instead.", nb.Name))
	}
	s.Drop(store.ChangeBox, b.Name)
	if err := s.done(ctx, b.Name, http.StatusCreated, "enrolled the box", "from", DescribeFrom(from), "ttl", ttl); err != nil {
		return BoxToken{}, err
	}
	return BoxToken{Box: BoxViewOf(b, nil, now), Token: tok}, nil
}

// RotateBoxWith replaces the token of the box named name with a new one,
// which the answer shows this once; tr says how long the old one goes on
// and the new one's lifetime. NotFound for no such box.
func (s *Service) RotateBoxWith(ctx context.Context, name string, tr TokenRotation) (BoxToken, error) {
	b, err := s.StoredBox(ctx, name)
	if err != nil {
		return BoxToken{}, err
	}
	grace, err := ParseLifetime("grace", tr.Grace)
	if err != nil {
		return BoxToken{}, err
	}
	var ttl *time.Duration
	if tr.TTL != nil {
		d, err := ParseLifetime("ttl", *tr.TTL)
		if err != nil {
			return BoxToken{}, err
		}
		ttl = &d
	}
	tok, err := token.NewBox()
	if err != nil {
		return BoxToken{}, err
	}
	rot := Rotation(b, token.Hash(tok), s.cfg.Now(), ttl, grace)
	if err := s.cfg.Store.ReplaceToken(ctx, name, rot); err != nil {
		return BoxToken{}, StoreError(err, NoBox(name), "")
	}
	if err := s.wrote(ctx, store.ChangeBox, name, name, http.StatusOK, "rotated the box's token", "grace", grace, "ttl", rot.TTL); err != nil {
		return BoxToken{}, err
	}
	v, err := s.Box(ctx, name)
	if err != nil {
		return BoxToken{}, err
	}
	return BoxToken{Box: v, Token: tok}, nil
}

// UpdateBox changes the settings of the box named name that set holds
// (consent, paused, where its token is taken from), each audited, and
// returns the box as changed. NotFound for no such box.
func (s *Service) UpdateBox(ctx context.Context, name string, set BoxSettings) (BoxView, error) {
	b, err := s.StoredBox(ctx, name)
	if err != nil {
		return BoxView{}, err
	}
	var did []string
	if set.From != nil {
		from, err := ParseFrom(*set.From)
		if err != nil {
			return BoxView{}, err
		}
		if err := s.cfg.Store.BindBox(ctx, name, from); err != nil {
			return BoxView{}, StoreError(err, NoBox(name), "")
		}
		b.From = from
		did = append(did, "bound the box's token to "+DescribeFrom(from))
	}
	if set.Consent != nil && *set.Consent != b.Consent {
		b.Consent = *set.Consent
		did = append(did, map[bool]string{true: "set the box's consent on", false: "set the box's consent off"}[b.Consent])
	}
	if set.Paused != nil && *set.Paused != b.Paused {
		b.Paused = *set.Paused
		did = append(did, map[bool]string{true: "paused the box", false: "resumed the box"}[b.Paused])
	}
	if set.Consent != nil || set.Paused != nil {
		// Only what set holds is written: a payer or another setting
		// changed since b was read stands.
		if err := s.cfg.Store.ChangeBox(ctx, name, store.BoxChange{Consent: set.Consent, Paused: set.Paused}); err != nil {
			return BoxView{}, StoreError(err, NoBox(name), "")
		}
	}
	if err := s.Changed(ctx, store.ChangeBox, name); err != nil {
		return BoxView{}, err
	}
	for _, m := range did {
		if err := s.done(ctx, name, http.StatusOK, m); err != nil {
			return BoxView{}, err
		}
	}
	return s.view(ctx, b)
}

// RemoveBox removes the box named name, with its declaration, secrets,
// grants and feedback, and the owner's credential, which is the box's
// alone. NotFound for no such box.
func (s *Service) RemoveBox(ctx context.Context, name string) error {
	if err := CheckBoxName(name); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteBox(ctx, name); err != nil {
		return StoreError(err, NoBox(name), "")
	}
	owner := payer.OwnerAnthropic(name)
	if err := s.cfg.Store.DeleteCredential(ctx, owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("removed box %s, but not its owner's credential: %w", name, err)
	}
	s.Drop(store.ChangeCredential, owner)
	return s.wrote(ctx, store.ChangeBox, name, name, http.StatusNoContent, "removed the box and all kept for it")
}

// ParseFrom reads the source CIDRs a box's token is bound to, as the
// admin API takes them (a list) or the CLI (one comma-separated string,
// split first): nil for none or "any". Invalid names the entry.
func ParseFrom(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range list {
		if strings.EqualFold(strings.TrimSpace(v), "any") && len(list) == 1 {
			return nil, nil
		}
		p, err := store.ParseFrom(v)
		if err != nil {
			return nil, Errorf(Invalid, "%s: give CIDRs such as 10.20.0.0/16, or single addresses.", err)
		}
		out = append(out, p...)
	}
	return out, nil
}

// ParseLifetime reads a token's TTL or a rotation's grace, a Go duration
// such as "720h" ("" is 0); what names the field for the refusal.
func ParseLifetime(what, v string) (time.Duration, error) {
	if strings.TrimSpace(v) == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 {
		return 0, Errorf(Invalid, "The %s %q is not a duration such as 1h or 720h.", what, v)
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
