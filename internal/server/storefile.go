package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// storeFileEvery is how often the SQLite database file's identity is
// checked while serving: one stat(2), so often that few calls are
// answered into a file that is gone. /readyz reports the last check
// and never waits on the disk.
const storeFileEvery = 250 * time.Millisecond

// fileWatch watches that the SQLite store's database file is still the
// one it opened (sqlite.Store.CheckFile): once it is not, every box call
// is refused as one that cannot be recorded, /readyz names it, and one
// ERROR line says why. A nil *fileWatch (PostgreSQL) finds nothing.
type fileWatch struct {
	check func() error // the store's CheckFile
	log   *slog.Logger
	once  sync.Once // guards the one log line
	gone  atomic.Pointer[error]
}

// Err is the failure Check found, nil while it has found none; it looks
// at nothing on disk, so each box call can ask it.
func (w *fileWatch) Err() error {
	if w == nil {
		return nil
	}
	if p := w.gone.Load(); p != nil {
		return *p
	}
	return nil
}

// Check checks the file now, and logs the first failure.
func (w *fileWatch) Check() error {
	if w == nil {
		return nil
	}
	err := w.check()
	if err != nil {
		w.once.Do(func() {
			w.gone.Store(&err)
			w.log.Error("store: the SQLite database file is gone from the data directory: box calls are refused (503, cannot record) "+
				"and /readyz fails until serve is restarted; stop serve, put the database back from its backup (docs/deploy.md, Backups) and start serve again",
				"err", err)
		})
	}
	return err
}

// Run checks the file every storeFileEvery until ctx ends or the file
// is found gone (it stays gone).
func (w *fileWatch) Run(ctx context.Context) {
	if w != nil {
		every(ctx, storeFileEvery, func() bool { return w.Check() == nil })
	}
}
