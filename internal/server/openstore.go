package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/auditsink"
	"github.com/intentius/boxbroker/internal/metrics"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/store/deadline"
	"github.com/intentius/boxbroker/internal/store/postgres"
	"github.com/intentius/boxbroker/internal/store/sqlite"
	"github.com/intentius/boxbroker/internal/webhook"
)

// OpenStore opens the store cfg names: SQLite in the data directory
// (created, mode 0700, if missing; refused, ErrDataDirOpen, when other
// users may put files in it), or PostgreSQL.
func OpenStore(ctx context.Context, cfg *Config) (store.Store, error) {
	return openStore(ctx, cfg, nil)
}

// openStore is OpenStore with each of the store's operations run
// through around (nil: none).
func openStore(ctx context.Context, cfg *Config, around deadline.Around) (store.Store, error) {
	if isPostgres(cfg.Store) {
		st, err := postgres.Open(ctx, cfg.Store, postgres.WithAround(around))
		if err != nil {
			return nil, err // it says "open postgres store" itself
		}
		return st, nil
	}
	if err := makeDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(cfg.DataDir, DBFile), sqlite.WithAround(around))
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	return st, nil
}

// isPostgres reports whether store names PostgreSQL.
func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// warnOpenDataDir logs a warning when others than its owner may enter or
// read dir, which holds the SQLite store or the master key file. The
// files in it are mode 0600 whatever its mode, but their names, sizes and
// times are not; and a group that may write into it may also rename or
// remove them, and put a file of its own at a name not yet made (a link,
// a FIFO or a device there is refused as opened: filelock.Open).
func warnOpenDataDir(log *slog.Logger, dir string) {
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	msg := "the data directory can be read by others than its owner; its files are mode 0600, but make it 0700"
	if fi.Mode().Perm()&0o020 != 0 {
		msg = "the data directory can be read by others than its owner, and its group can put files in it and rename or remove boxbroker's; " +
			"a link, FIFO or device in place of a file of boxbroker's is refused, but make it 0700 unless a group must share it"
	}
	log.Warn(msg, "dir", dir, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
}

// StoreWhere says where the store is, without any password: a
// PostgreSQL URL as protocol.ShownURL shows it, but with its query, in which the
// value of any parameter whose name holds "password" (pgx takes the
// password, and the TLS key's, there too) is "xxxxx". A URL it cannot
// read is not shown at all.
func StoreWhere(cfg *Config) string {
	if cfg.Store == "" {
		return filepath.Join(cfg.DataDir, DBFile)
	}
	u, err := url.Parse(cfg.Store)
	if err != nil {
		return "(a URL that cannot be read, not shown: it may hold a password)"
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(strings.ToLower(k), "password") {
			q[k] = []string{"xxxxx"}
		}
	}
	where := protocol.ShownURL(&url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host, Path: u.Path, RawPath: u.RawPath})
	if len(q) > 0 {
		where += "?" + q.Encode()
	}
	return where
}

// LoadKeyring loads the master key cfg names. The data directory is
// created when the key file lives there, and refused (ErrDataDirOpen)
// when other users may put files in it.
func LoadKeyring(cfg *Config) (*secrets.Keyring, error) {
	k, _, err := loadKeyring(cfg)
	return k, err
}

// loadKeyring is LoadKeyring's, with created true when it made the key
// file.
func loadKeyring(cfg *Config) (k *secrets.Keyring, created bool, err error) {
	if cfg.MasterKey == "" {
		if err := makeDataDir(cfg.DataDir); err != nil {
			return nil, false, err
		}
	}
	return secrets.Load(cfg.DataDir, cfg.MasterKey)
}

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

// proposalWebhook starts the webhook cfg names, or returns nil when it
// names none.
func proposalWebhook(cfg Config, log *slog.Logger) (*approval.Webhook, error) {
	if cfg.ProposalWebhook == "" {
		return nil, nil
	}
	return approval.NewWebhook(approval.WebhookConfig{Shape: cfg.ProposalWebhookShape, PageURL: cfg.PageURL,
		Config: webhook.Config{URL: cfg.ProposalWebhook, Key: []byte(cfg.ProposalWebhookKey), Logger: log}})
}
