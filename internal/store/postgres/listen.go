package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/intentius/boxbroker/internal/store"
)

// Channel begins the name of the PostgreSQL notification channel every
// write that logs a change notifies when it commits: Channel, a dot and
// the store's schema, since channels are per database and several stores
// may share one database in schemas of their own.
const Channel = "boxbroker_changes"

var _ store.Notifier = (*Store)(nil)

// Listen calls notify once it listens, and then each time a write that
// logged a change commits, in this process or any other, until ctx ends or
// its connection fails. It holds a connection of its own, outside the
// pool. It returns ctx's error when ctx ends, and an error wrapping
// store.ErrUnavailable when the server cannot be reached or the connection
// is lost.
func (s *Store) Listen(ctx context.Context, notify func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.conn.Copy())
	if err != nil {
		return translate("listen", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the connection is done with either way
	if _, err := conn.Exec(ctx, "LISTEN "+s.channel); err != nil {
		return translate("listen", err)
	}
	// What was written before LISTEN took effect notified no one.
	notify()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return translate("listen", err)
		}
		notify()
	}
}
