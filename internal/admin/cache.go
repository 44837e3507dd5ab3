package admin

import (
	"context"

	"github.com/intentius/boxbroker/internal/operator"
)

// The prompt-cache bodies are the operator service's.
type (
	CacheTokens = operator.CacheTokens
	CacheLine   = operator.CacheLine
	CacheView   = operator.CacheView
)

// Cache returns the prompt-cache use of box (the fleet for "") in month
// (YYYY-MM) and in the last 24 hours (operator.Service.Cache).
func (s *Server) Cache(ctx context.Context, box, month string) (CacheView, error) {
	return s.op.Cache(ctx, box, month)
}
