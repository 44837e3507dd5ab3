package spend

import "sync"

// maxPooled is the largest buffer a bufPool keeps for reuse.
const maxPooled = 2 << 20

// bufPool holds byte buffers for reuse: the bodies and JSON answers the
// meter keeps while it reads them. A nil *bufPool makes each anew.
type bufPool struct{ p sync.Pool }

// get returns an empty buffer with room for at least n bytes.
func (b *bufPool) get(n int) *[]byte {
	if b != nil {
		if buf, _ := b.p.Get().(*[]byte); buf != nil && cap(*buf) >= n {
			*buf = (*buf)[:0]
			return buf
		}
	}
	buf := make([]byte, 0, max(n, 512))
	return &buf
}

// put gives buf, when not nil, back for reuse.
func (b *bufPool) put(buf *[]byte) {
	if b != nil && buf != nil && cap(*buf) <= maxPooled {
		b.p.Put(buf)
	}
}
