package operator

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// The bodies the operator's box actions take and give, as the admin API
// writes them in JSON. Times are RFC 3339 in UTC with milliseconds, as
// the protocol writes them; a field that is not known is null.

// BoxView is a box as the admin API shows it.
type BoxView struct {
	Name      string `json:"name"`
	CreatedAt string `json:"createdAt"`
	Consent   bool   `json:"consent"`
	Paused    bool   `json:"paused"`
	// Payer is who pays for the box's model calls when no grant applies:
	// kind shared, owner or visitor, and the principal (null when
	// unknown).
	Payer protocol.Payer `json:"payer"`
	// ReportedAt is when the box last reported its declaration; null if never.
	ReportedAt *string `json:"reportedAt"`
	// Capabilities are the entries of its last report naming this broker.
	Capabilities []protocol.Capability `json:"capabilities"`
	// Listing is the listing its last report carried; null if none.
	Listing *protocol.Listing `json:"listing"`
	// Spend is this month's spend its last report carried, in total and
	// by principal; null when the report carried none or another month's.
	Spend *protocol.Spend `json:"spend"`
	// From are the source CIDRs the box's token is bound to; empty when
	// it is taken from any address.
	From []string `json:"from"`
	// TokenTTL is the lifetime each of its tokens is minted with (a Go
	// duration, such as "720h0m0s"); null for none.
	TokenTTL *string `json:"tokenTTL"`
	// ExpiresAt is when its token stops being taken; null for never.
	ExpiresAt *string `json:"expiresAt"`
	// OldTokenUntil is when the token it had before its last rotation
	// stops being taken (a rotation's grace); null when there is none.
	OldTokenUntil *string `json:"oldTokenUntil"`
}

// NewBox is the body of POST /api/boxes. From binds its token to source
// CIDRs (or addresses; absent or empty: any address), and TTL, a Go
// duration such as "720h", gives each of its tokens that lifetime
// (absent: none).
type NewBox struct {
	Name    string   `json:"name"`
	Consent bool     `json:"consent"`
	Paused  bool     `json:"paused"`
	From    []string `json:"from,omitempty"`
	TTL     string   `json:"ttl,omitempty"`
}

// BoxSettings is the body of PATCH /api/boxes/{name}: the fields present
// are changed, the others kept. From, when present, binds the box's token
// to those source CIDRs; an empty list takes it from any address.
type BoxSettings struct {
	Consent *bool     `json:"consent,omitempty"`
	Paused  *bool     `json:"paused,omitempty"`
	From    *[]string `json:"from,omitempty"`
}

// TokenRotation is the body, optional, of POST /api/boxes/{name}/token.
// Grace, a Go duration such as "1h", keeps the old token taken that long
// beside the new one (absent: the old token stops at once); TTL, when
// present, is the lifetime of the box's tokens from now on ("0": none),
// and when absent the box keeps the one it has.
type TokenRotation struct {
	Grace string  `json:"grace,omitempty"`
	TTL   *string `json:"ttl,omitempty"`
}

// BoxToken answers POST /api/boxes and POST /api/boxes/{name}/token. The
// token is shown this once; the broker keeps only its hash.
type BoxToken struct {
	Box   BoxView `json:"box"`
	Token string  `json:"token"`
}

// Declaration reads a box's last kept report: nil when it never reported.
func (s *Service) Declaration(ctx context.Context, box string) (*protocol.Declaration, error) {
	doc, at, err := s.cfg.Store.Declaration(ctx, box)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeDeclaration(box, &store.KeptDeclaration{Doc: doc, At: at})
}

// BoxViewOf is how the admin API shows b, with its last report as d (nil for
// none), at now (for this month's spend).
func BoxViewOf(b store.Box, d *protocol.Declaration, now time.Time) BoxView {
	v := BoxView{
		Name:         b.Name,
		CreatedAt:    formatTime(b.CreatedAt),
		Consent:      b.Consent,
		Paused:       b.Paused,
		Payer:        protocol.Payer{Kind: b.PayerKind, Principal: Optional(b.PayerPrincipal)},
		Capabilities: []protocol.Capability{},
		From:         views(b.From, netip.Prefix.String),
	}
	if v.Payer.Kind == "" {
		v.Payer.Kind = protocol.PayerShared
	}
	if b.TokenTTL > 0 {
		ttl := b.TokenTTL.String()
		v.TokenTTL = &ttl
	}
	v.ExpiresAt = optionalTime(b.ExpiresAt)
	if b.OldTokenHash != "" {
		v.OldTokenUntil = optionalTime(b.OldUntil)
	}
	if d == nil {
		return v
	}
	at := formatTime(d.At)
	v.ReportedAt = &at
	for _, c := range d.Capabilities {
		if c.Scope == nil {
			c.Scope = []string{}
		}
		v.Capabilities = append(v.Capabilities, c)
	}
	v.Listing = d.Listing
	if d.Spend != nil && d.Spend.Month == now.UTC().Format("2006-01") {
		sp := *d.Spend
		if sp.ByPrincipal == nil {
			sp.ByPrincipal = []protocol.PrincipalSpend{}
		}
		v.Spend = &sp
	}
	return v
}

// views is xs each as view shows it: an empty list, never null, for none.
func views[S, V any](xs []S, view func(S) V) []V {
	out := make([]V, 0, len(xs))
	for _, x := range xs {
		out = append(out, view(x))
	}
	return out
}

// storeViews is xs each as view shows it (views), or, when the store
// failed to list them, its error err as StoreError says it.
func storeViews[S, V any](xs []S, err error, view func(S) V) ([]V, error) {
	if err != nil {
		return nil, StoreError(err, "", "")
	}
	return views(xs, view), nil
}

// formatTime writes t as the protocol does.
func formatTime(t time.Time) string { return protocol.FormatTime(t) }

// optionalTime is t as the admin API writes it: null for the zero time.
func optionalTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	v := formatTime(t)
	return &v
}

// Box reads the box named name, as the admin API shows it.
func (s *Service) Box(ctx context.Context, name string) (BoxView, error) {
	b, err := s.StoredBox(ctx, name)
	if err != nil {
		return BoxView{}, err
	}
	return s.view(ctx, b)
}

// view reads what BoxViewOf needs for b.
func (s *Service) view(ctx context.Context, b store.Box) (BoxView, error) {
	d, err := s.Declaration(ctx, b.Name)
	if err != nil {
		return BoxView{}, StoreError(err, "", "")
	}
	return BoxViewOf(b, d, s.cfg.Now()), nil
}

// StoredBox reads the box named name as the store keeps it: Invalid for
// no box name, NotFound for no such box.
func (s *Service) StoredBox(ctx context.Context, name string) (store.Box, error) {
	if err := CheckBoxName(name); err != nil {
		return store.Box{}, err
	}
	b, err := s.cfg.Store.Box(ctx, name)
	return b, StoreError(err, NoBox(name), "")
}
