package server

import (
	"log/slog"

	"github.com/intentius/boxbroker/internal/store"
)

// notify is what is told of each new proposal: the webhook cfg names, or
// nothing.
func (opt Options) notify(cfg Config, log *slog.Logger) func(store.Proposal) {
	return nil
}
