package server

import (
	"context"
	"log/slog"
	"strings"
)

// aboutAClient begins each line net/http logs for a client's connection
// that went wrong before any request was read, or broke HTTP/2's rules:
// a failed TLS handshake, no HTTP/2 preface, no SETTINGS frame after it,
// an HTTP/2 connection error, no answer to a PING (httpServer), a GOAWAY
// the client sent with an error code.
var aboutAClient = []string{
	"http: TLS handshake error from ",
	"http2: server: error reading preface from client ",
	"timeout waiting for SETTINGS frames from ",
	"http2: server connection error from ",
	"timeout waiting for PING response",
	"http2: received GOAWAY ",
}

// netLog is the servers' ErrorLog: what net/http logs itself, at WARN,
// but for a line about a client's connection (aboutAClient), at DEBUG.
// Any client may open connections as fast as it likes and close them
// unfinished, speak plain HTTP or an old TLS, or send what is not
// HTTP/2, and each would otherwise be a WARN line, written out at once;
// a request with no token is not logged on its own either (broker's
// Tally).
type netLog struct{ log *slog.Logger }

func (l netLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	for _, prefix := range aboutAClient {
		if strings.HasPrefix(msg, prefix) {
			level = slog.LevelDebug
			break
		}
	}
	l.log.Log(context.Background(), level, msg)
	return len(p), nil
}
