package spend

import (
	"io"
	"net/http"
	"sync"

	"github.com/intentius/boxbroker/internal/capability"
)

// bodyScan is the body of a request its capability meters unread (a
// Messages call), of a box without a budget. Nothing is reserved for such
// a call, so its body is not read before it is forwarded: it is forwarded
// as it comes, and bodyScan keeps the bytes as the proxy reads them (up to
// the capability's limit, as many as would have been read before), for
// the call's settlement to be estimated as it would have been from the
// body read whole before. It holds no byte back: the capability reads the
// kept bytes as soon as the proxy has read the whole body (or when it
// closes it, or the call settles, if that is first), and they are let go
// then, so that a stream's answer does not keep its request's body.
type bodyScan struct {
	body   io.ReadCloser
	r      *http.Request // the request, for Estimate
	cap    capability.Metered
	length int64 // the Content-Length, or -1
	limit  int64 // the most of the body cap reads
	bufs   *bufPool

	// mu guards what follows: the proxy may read the body on a goroutine
	// of its own, and may still be at it when the call settles.
	mu   sync.Mutex
	buf  *[]byte // the bytes read; nil once over limit, or read by cap
	n    int64   // bytes read
	eof  bool
	read bool                // est is cap's estimate of the whole body
	est  capability.Estimate // see read
	done bool                // settled: later reads are not looked at
}

// wrap puts b in front of r's body, which c reads up to limit bytes.
func (b *bodyScan) wrap(r *http.Request, c capability.Metered, limit int64, bufs *bufPool) {
	b.r, b.cap, b.length, b.limit, b.bufs = r, c, r.ContentLength, limit, bufs
	if r.Body == nil || r.Body == http.NoBody {
		b.eof = true // an empty body, read whole
		return
	}
	b.body = r.Body
	size := 0
	if b.length > 0 && b.length <= limit {
		size = int(b.length)
	}
	b.buf = bufs.get(size)
	r.Body = b
}

// Read reads from the body, and keeps what it read before handing it on.
func (b *bodyScan) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	if !b.done {
		b.n += int64(n)
		if b.buf != nil && b.n > b.limit {
			b.bufs.put(b.buf) // not read, as before
			b.buf = nil
		}
		if b.buf != nil {
			*b.buf = append(*b.buf, p[:n]...)
		}
		if err == io.EOF {
			b.eof = true
		}
		// Read whole: the capability reads it now, and the kept bytes
		// go, rather than stay for as long as the answer streams.
		b.readLocked()
	}
	b.mu.Unlock()
	return n, err
}

// Close closes the body, has the capability read it when it was read
// whole, and lets the kept bytes go: no more can come.
func (b *bodyScan) Close() error {
	err := b.body.Close()
	b.mu.Lock()
	b.readLocked()
	b.bufs.put(b.buf)
	b.buf = nil
	b.mu.Unlock()
	return err
}

// wholeLocked reports whether the body was read to its end.
func (b *bodyScan) wholeLocked() bool { return b.eof || b.length >= 0 && b.n >= b.length }

// readLocked has the capability read the kept body, when it is whole and
// not over the limit, and lets it go.
func (b *bodyScan) readLocked() {
	if b.done || b.read || b.buf == nil || !b.wholeLocked() {
		return
	}
	b.est, b.read = b.cap.Estimate(b.r, *b.buf), true
	b.bufs.put(b.buf)
	b.buf = nil
}

// estimate estimates the call from what was read of its body, as it
// would have been estimated from the body read whole before forwarding
// it: from the capability's reading and the body's length when it was
// read to its end and is not over the limit; from its Content-Length and
// maxTokens when it was not read whole; from maxBody and maxTokens when
// its length is unknown too, or over the limit. It ends the scan.
func (b *bodyScan) estimate(maxTokens, maxBody int64) Estimate {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.readLocked()
	e, n := b.est, maxBody
	switch {
	case b.read:
		n = b.n
	case b.wholeLocked() && b.n <= b.limit:
		n = b.n // an empty body
	case b.length >= 0:
		n = b.length
	}
	if !b.read {
		e = b.cap.Estimate(b.r, nil)
	}
	b.releaseLocked()
	return EstimateOf(e, n, maxTokens)
}

// release ends the scan, if estimate has not.
func (b *bodyScan) release() {
	b.mu.Lock()
	b.releaseLocked()
	b.mu.Unlock()
}

func (b *bodyScan) releaseLocked() {
	b.done = true
	b.bufs.put(b.buf)
	b.buf = nil
}
