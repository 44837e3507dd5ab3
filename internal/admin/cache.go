package admin

import (
	"context"

	"github.com/intentius/boxbroker/internal/operator"
)

// Cache returns the prompt-cache use of box (the fleet for "") in month
// (YYYY-MM) and in the last 24 hours (operator.Service.Cache).
func (s *Server) Cache(ctx context.Context, box, month string) (operator.CacheView, error) {
	return s.op.Cache(ctx, box, month)
}
