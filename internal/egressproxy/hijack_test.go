package egressproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// hijackable is a ResponseWriter whose connection is conn.
type hijackable struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

// TestHijack_ClientGoneIsNoTunnel: when the CONNECT's 200 cannot be
// written (the client has gone), hijack returns the error and closes the
// connection, and no tunnel is opened on it.
func TestHijack_ClientGoneIsNoTunnel(t *testing.T) {
	ours, theirs := net.Pipe()
	theirs.Close()
	conn, err := hijack(&hijackable{conn: ours})
	if err == nil || conn != nil {
		t.Fatalf("hijack with the client gone = %v, %v; want no connection and an error", conn, err)
	}
	if _, err := ours.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read on the connection after hijack failed = %v, want %v (hijack closed it)", err, io.ErrClosedPipe)
	}
}
