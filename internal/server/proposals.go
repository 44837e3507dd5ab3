package server

import (
	"log/slog"

	"github.com/intentius/boxbroker/internal/approval"
)

// proposalWebhook starts the webhook cfg names, or returns nil when it
// names none.
func proposalWebhook(cfg Config, log *slog.Logger) (*approval.Webhook, error) {
	if cfg.ProposalWebhook == "" {
		return nil, nil
	}
	return approval.NewWebhook(approval.WebhookConfig{URL: cfg.ProposalWebhook, Shape: cfg.ProposalWebhookShape,
		Key: []byte(cfg.ProposalWebhookKey), PageURL: cfg.PageURL, Logger: log})
}
