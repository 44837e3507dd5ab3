package server

import (
	"context"
	"log/slog"
	"strings"
)

// handshakeFailed begins the line net/http logs for each connection whose
// TLS handshake fails.
const handshakeFailed = "http: TLS handshake error from "

// netLog is the servers' ErrorLog: what net/http logs itself, at WARN,
// but for a failed TLS handshake, at DEBUG. Any client may open
// connections and close them, speak plain HTTP or an old TLS to the
// listener as fast as it likes, and each would otherwise be a WARN line,
// written out at once; a request with no token is not logged on its own
// either (broker's Tally).
type netLog struct{ log *slog.Logger }

func (l netLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, handshakeFailed) {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, msg)
	return len(p), nil
}
