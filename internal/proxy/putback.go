package proxy

import (
	"bytes"
	"io"
)

// PutBack is body with read, the bytes already read of it, put back in
// front of the rest: it reads read, then what is left of body, and its
// Close closes body.
func PutBack(read []byte, body io.ReadCloser) io.ReadCloser {
	return putBack{io.MultiReader(bytes.NewReader(read), body), body}
}

type putBack struct {
	io.Reader
	io.Closer
}
