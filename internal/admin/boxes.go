package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// formatTime writes t as the admin API does: the protocol's ISO time.
func formatTime(t time.Time) string { return protocol.FormatTime(t) }

// BoxName reads and checks the {name} path value.
func BoxName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !protocol.IsBoxName(name) {
		return "", capability.Errorf(http.StatusBadRequest, protocol.TypeInvalid, "A box name matches ^[a-z][a-z0-9-]{0,62}$.")
	}
	return name, nil
}

// Drop tells the cache, when there is one, what a write touched.
func (s *Server) Drop(kind, key string) {
	if s.cfg.Cache != nil {
		s.cfg.Cache.Drop(kind, key)
	}
}

// Changed tells the cache what a write of something the box-facing side
// caches touched, and returns once the write is in force on every replica
// (cache.Cache.Settle: at once on SQLite, after the staleness bound with
// a shared store), so that a 2xx from the admin API means the box's next
// request is judged by it, whichever replica it reaches. Grants and
// visitors' credentials are read from the store on every request that
// needs them, so their writes need no wait; whether a box has a budget is
// cached, so budgets' writes wait too.
func (s *Server) Changed(ctx context.Context, kind, key string) error {
	if s.cfg.Cache == nil {
		return nil
	}
	s.cfg.Cache.Drop(kind, key)
	if err := s.cfg.Cache.Settle(ctx); err != nil {
		return fmt.Errorf("wait for every replica to see a %s change: %w", kind, err)
	}
	return nil
}

// Declaration reads a box's last kept report: nil when it never reported.
func (s *Server) Declaration(ctx context.Context, box string) (*protocol.Declaration, error) {
	doc, at, err := s.cfg.Store.Declaration(ctx, box)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d protocol.Declaration
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("declaration of box %s: %w", box, err)
	}
	d.At = at
	return &d, nil
}

// BoxViewOf is how the admin API shows b, with its last report as d (nil for
// none), at now (for this month's spend).
func BoxViewOf(b store.Box, d *protocol.Declaration, now time.Time) BoxView {
	v := BoxView{
		Name:         b.Name,
		CreatedAt:    formatTime(b.CreatedAt),
		Consent:      b.Consent,
		Paused:       b.Paused,
		Payer:        PayerView{Kind: b.PayerKind},
		Capabilities: []CapabilityView{},
	}
	if v.Payer.Kind == "" {
		v.Payer.Kind = protocol.PayerShared
	}
	v.From = []string{}
	for _, p := range b.From {
		v.From = append(v.From, p.String())
	}
	if b.TokenTTL > 0 {
		ttl := b.TokenTTL.String()
		v.TokenTTL = &ttl
	}
	v.ExpiresAt = optionalTime(b.ExpiresAt)
	if b.OldTokenHash != "" {
		v.OldTokenUntil = optionalTime(b.OldUntil)
	}
	if b.PayerPrincipal != "" {
		p := b.PayerPrincipal
		v.Payer.Principal = &p
	}
	if d == nil {
		return v
	}
	at := formatTime(d.At)
	v.ReportedAt = &at
	for _, c := range d.Capabilities {
		scope := c.Scope
		if scope == nil {
			scope = []string{}
		}
		v.Capabilities = append(v.Capabilities, CapabilityView{Name: c.Name, Broker: c.Broker, Scope: scope})
	}
	if d.Listing != nil {
		v.Listing = &ListingView{Published: d.Listing.Published, Title: d.Listing.Title, Line: d.Listing.Line}
	}
	if sp := d.Spend; sp != nil && sp.Month == now.UTC().Format("2006-01") {
		v.Spend = &SpendView{Month: sp.Month, USD: sp.USD, Runs: sp.Runs, Unpriced: sp.Unpriced, ByPrincipal: []PrincipalView{}}
		for _, p := range sp.ByPrincipal {
			v.Spend.ByPrincipal = append(v.Spend.ByPrincipal, PrincipalView{Principal: p.Principal, USD: p.USD, Runs: p.Runs, Unpriced: p.Unpriced})
		}
	}
	return v
}

// boxView reads what view needs for b.
func (s *Server) boxView(ctx context.Context, b store.Box) (BoxView, error) {
	d, err := s.Declaration(ctx, b.Name)
	if err != nil {
		return BoxView{}, err
	}
	return BoxViewOf(b, d, s.cfg.Now()), nil
}

// published reports whether v's last report listed it as published.
func published(v BoxView) bool { return v.Listing != nil && v.Listing.Published }

// Boxes returns every box as the admin API shows it: the ones whose
// listing is published first, then the others, each part by name.
func (s *Server) Boxes(ctx context.Context) ([]BoxView, error) {
	boxes, err := s.cfg.Store.ListBoxes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]BoxView, 0, len(boxes))
	for _, b := range boxes {
		v, err := s.boxView(ctx, b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if pi, pj := published(out[i]), published(out[j]); pi != pj {
			return pi
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func (s *Server) listBoxes(w http.ResponseWriter, r *http.Request) error {
	boxes, err := s.Boxes(r.Context())
	if err != nil {
		return StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, BoxList{Boxes: boxes})
}

// Box reads the box named in r's {name} path value, or refuses with a
// 400 (not a box name) or a 404 (no such box).
func (s *Server) Box(r *http.Request) (store.Box, error) {
	name, err := BoxName(r)
	if err != nil {
		return store.Box{}, err
	}
	b, err := s.cfg.Store.Box(r.Context(), name)
	return b, StoreError(err, fmt.Sprintf("There is no box named %s.", name), "")
}

func (s *Server) getBox(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Box(r)
	if err != nil {
		return err
	}
	v, err := s.boxView(r.Context(), b)
	if err != nil {
		return StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) addBox(w http.ResponseWriter, r *http.Request) error {
	var nb NewBox
	if err := readJSON(w, r, &nb); err != nil {
		return err
	}
	if !protocol.IsBoxName(nb.Name) {
		return capability.Errorf(http.StatusBadRequest, protocol.TypeInvalid, "A box name matches ^[a-z][a-z0-9-]{0,62}$.")
	}
	from, err := ParseFrom(nb.From)
	if err != nil {
		return err
	}
	ttl, err := ParseLifetime("ttl", nb.TTL)
	if err != nil {
		return err
	}
	tok, err := token.NewBox()
	if err != nil {
		return err
	}
	now := s.cfg.Now().UTC()
	b := store.Box{Name: nb.Name, TokenHash: token.Hash(tok), CreatedAt: now,
		Consent: nb.Consent, Paused: nb.Paused, PayerKind: protocol.PayerShared, From: from, TokenTTL: ttl}
	if ttl > 0 {
		b.ExpiresAt = now.Add(ttl)
	}
	if err := s.cfg.Store.CreateBox(r.Context(), b); err != nil {
		return StoreError(err, "", fmt.Sprintf("A box named %s already exists; rotate its token with POST /api/boxes/%s/token.", nb.Name, nb.Name))
	}
	s.Drop(store.ChangeBox, b.Name)
	s.log.Info("admin: box added", "box", b.Name, "from", DescribeFrom(from), "ttl", ttl)
	return writeJSON(w, http.StatusCreated, BoxToken{Box: BoxViewOf(b, nil, s.cfg.Now()), Token: tok})
}

func (s *Server) updateBox(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Box(r)
	if err != nil {
		return err
	}
	var set BoxSettings
	if err := readJSON(w, r, &set); err != nil {
		return err
	}
	if set.Consent != nil {
		b.Consent = *set.Consent
	}
	if set.Paused != nil {
		b.Paused = *set.Paused
	}
	if set.From != nil {
		if b.From, err = ParseFrom(*set.From); err != nil {
			return err
		}
		if err := s.BindBox(r.Context(), b.Name, b.From); err != nil {
			return err
		}
		if err := s.Audit(r.Context(), b.Name, http.MethodPatch, "/api/boxes/{name}", http.StatusOK, BoundMessage(b.From)); err != nil {
			return err
		}
	}
	if err := s.cfg.Store.UpdateBox(r.Context(), b); err != nil {
		return StoreError(err, fmt.Sprintf("There is no box named %s.", b.Name), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBox, b.Name); err != nil {
		return err
	}
	s.log.Info("admin: box updated", "box", b.Name, "consent", b.Consent, "paused", b.Paused)
	v, err := s.boxView(r.Context(), b)
	if err != nil {
		return StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeBox(w http.ResponseWriter, r *http.Request) error {
	name, err := BoxName(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteBox(r.Context(), name); err != nil {
		return StoreError(err, fmt.Sprintf("There is no box named %s.", name), "")
	}
	// The owner's credential is the box's alone; it goes with the box.
	if err := s.cfg.Store.DeleteCredential(r.Context(), payer.OwnerAnthropic(name)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("removed box %s, but not its owner's credential: %w", name, err)
	}
	s.Drop(store.ChangeCredential, payer.OwnerAnthropic(name))
	if err := s.Changed(r.Context(), store.ChangeBox, name); err != nil {
		return err
	}
	s.log.Info("admin: box removed", "box", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rotateBox(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Box(r)
	if err != nil {
		return err
	}
	var tr TokenRotation
	if r.ContentLength > 0 {
		if err := readJSON(w, r, &tr); err != nil {
			return err
		}
	}
	grace, err := ParseLifetime("grace", tr.Grace)
	if err != nil {
		return err
	}
	var ttl *time.Duration
	if tr.TTL != nil {
		d, err := ParseLifetime("ttl", *tr.TTL)
		if err != nil {
			return err
		}
		ttl = &d
	}
	tok, err := token.NewBox()
	if err != nil {
		return err
	}
	rot := Rotation(b, token.Hash(tok), s.cfg.Now(), ttl, grace)
	if err := s.cfg.Store.ReplaceToken(r.Context(), b.Name, rot); err != nil {
		return StoreError(err, fmt.Sprintf("There is no box named %s.", b.Name), "")
	}
	if err := s.Changed(r.Context(), store.ChangeBox, b.Name); err != nil {
		return err
	}
	s.log.Info("admin: box token rotated", "box", b.Name, "grace", grace, "ttl", rot.TTL)
	if b, err = s.cfg.Store.Box(r.Context(), b.Name); err != nil {
		return StoreError(err, "", "")
	}
	v, err := s.boxView(r.Context(), b)
	if err != nil {
		return StoreError(err, "", "")
	}
	return writeJSON(w, http.StatusOK, BoxToken{Box: v, Token: tok})
}
