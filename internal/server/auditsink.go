package server

import (
	"log/slog"

	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/metrics"
)

// openAuditSink opens the audit sink cfg configures, its backlog in the
// data directory and its metrics beside the broker's; nil (and no
// error) when cfg names none.
func openAuditSink(cfg *Config, m *metrics.Metrics, log *slog.Logger) (*auditsink.Sink, error) {
	if cfg.AuditSinkURL == nil {
		return nil, nil
	}
	return auditsink.Open(auditsink.Config{URL: cfg.AuditSinkURL, Token: cfg.AuditSinkToken, Dir: cfg.DataDir,
		MaxBacklog: cfg.AuditSinkBacklog, Logger: log, Registerer: m.Registry()})
}
