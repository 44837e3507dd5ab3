package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/store"
)

// DecodeDeclaration reads k, box's last kept report; nil for nil.
func DecodeDeclaration(box string, k *store.KeptDeclaration) (*protocol.Declaration, error) {
	if k == nil {
		return nil, nil
	}
	var d protocol.Declaration
	if err := json.Unmarshal(k.Doc, &d); err != nil {
		return nil, fmt.Errorf("declaration of box %s: %w", box, err)
	}
	d.At = k.At
	return &d, nil
}

// BoxPage returns one page of boxes as the admin API shows them, in q's
// order, and where the next page starts ("" for none). q.Month is set
// here (this month) when q sorts by spend.
func (s *Service) BoxPage(ctx context.Context, q store.BoxQuery) ([]BoxView, string, error) {
	now := s.cfg.Now()
	if q.Sort == store.BoxSortSpend {
		q.Month = spend.Month(now)
	}
	p, err := s.cfg.Store.ListBoxPage(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]BoxView, 0, len(p.Boxes))
	if err := eachView(p, now, func(v BoxView) error {
		out = append(out, v)
		return nil
	}); err != nil {
		return nil, "", err
	}
	next := ""
	if p.Next != nil {
		next = p.Next.String()
	}
	return out, next, nil
}

// EachBox calls fn with every box, by name, reading them limit at a
// time; it stops at fn's first error and returns it.
func (s *Service) EachBox(ctx context.Context, limit int, fn func(BoxView) error) error {
	q := store.BoxQuery{Limit: limit}
	for {
		p, err := s.cfg.Store.ListBoxPage(ctx, q)
		if err != nil {
			return StoreError(err, "", "")
		}
		if err := eachView(p, s.cfg.Now(), fn); err != nil {
			return err
		}
		if p.Next == nil {
			return nil
		}
		q.After = p.Next
	}
}

// eachView calls fn with each of p's boxes as the admin API shows it at
// now, stopping at the first error.
func eachView(p store.BoxPage, now time.Time, fn func(BoxView) error) error {
	for _, lb := range p.Boxes {
		d, err := DecodeDeclaration(lb.Box.Name, lb.Declaration)
		if err != nil {
			return err
		}
		if err := fn(BoxViewOf(lb.Box, d, now)); err != nil {
			return err
		}
	}
	return nil
}
