package operator

import (
	"context"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/store"
)

// Rate limits are read by package ratelimit from the store every second
// on each replica, so a change needs no Changed: it holds within that.

// RateLimitView is one rate limit: input and output tokens and requests
// a minute (0: no bound), of the box itself (principal null) or of the
// calls one principal pays for. It is also the body of PUT
// /api/boxes/{name}/rate-limits.
type RateLimitView struct {
	Principal *string `json:"principal"`
	InputTPM  int64   `json:"input_tpm"`
	OutputTPM int64   `json:"output_tpm"`
	RPM       int64   `json:"rpm"`
	UpdatedAt string  `json:"updatedAt,omitempty"`
}

// RateLimits returns box's rate limits. NotFound for no such box.
func (s *Service) RateLimits(ctx context.Context, box string) ([]RateLimitView, error) {
	if _, err := s.StoredBox(ctx, box); err != nil {
		return nil, err
	}
	ls, err := s.cfg.Store.ListRateLimits(ctx, box)
	return storeViews(ls, err, func(l store.RateLimit) RateLimitView {
		return RateLimitView{Principal: Optional(l.Principal), InputTPM: l.InputTPM, OutputTPM: l.OutputTPM, RPM: l.RPM, UpdatedAt: formatTime(l.UpdatedAt)}
	})
}

// SetRateLimit sets box's own rate limit, or set's principal's on it.
// Invalid for a bad principal or bounds (none negative, one above 0),
// NotFound for no such box.
func (s *Service) SetRateLimit(ctx context.Context, box string, set RateLimitView) (RateLimitView, error) {
	principal, err := limitOf(box, set.Principal)
	if err != nil {
		return RateLimitView{}, err
	}
	if set.InputTPM < 0 || set.OutputTPM < 0 || set.RPM < 0 || set.InputTPM+set.OutputTPM+set.RPM == 0 {
		return RateLimitView{}, Errorf(Invalid,
			"input_tpm, output_tpm and rpm are tokens or requests a minute, 0 or more (0: no bound), and at least one is above 0; DELETE removes a limit.")
	}
	l := store.RateLimit{Box: box, Principal: principal, InputTPM: set.InputTPM, OutputTPM: set.OutputTPM, RPM: set.RPM, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetRateLimit(ctx, l); err != nil {
		return RateLimitView{}, StoreError(err, NoBox(box), "")
	}
	msg := fmt.Sprintf("set the rate limit of %s to %d input tokens, %d output tokens and %d requests a minute (0: no bound)", whoseOf(principal), l.InputTPM, l.OutputTPM, l.RPM)
	if err := s.done(ctx, box, http.StatusOK, msg); err != nil {
		return RateLimitView{}, err
	}
	set.Principal, set.UpdatedAt = Optional(principal), formatTime(l.UpdatedAt)
	return set, nil
}

// RemoveRateLimit removes box's own rate limit (principal "") or
// principal's on it. NotFound for no such rate limit.
func (s *Service) RemoveRateLimit(ctx context.Context, box, principal string) error {
	if _, err := limitOf(box, &principal); err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteRateLimit(ctx, box, principal); err != nil {
		return StoreError(err, fmt.Sprintf("Box %s has no rate limit%s.", box, forPrincipal(principal)), "")
	}
	return s.done(ctx, box, http.StatusNoContent, "removed the rate limit of "+whoseOf(principal))
}
