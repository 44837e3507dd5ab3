package proxy

import (
	"net/http"
	"testing"
)

func TestBufferPool_LendsSmallBuffers(t *testing.T) {
	var p bufferPool
	b := p.Get()
	if len(b) != CopyBufferSize {
		t.Fatalf("len(Get()) = %d, want %d", len(b), CopyBufferSize)
	}
	p.Put(b)
	p.Put(make([]byte, 10)) // too small to keep: ignored
	if got := p.Get(); len(got) != CopyBufferSize {
		t.Errorf("len(Get()) after Put = %d, want %d", len(got), CopyBufferSize)
	}
}

func TestNew_PoolsBuffers(t *testing.T) {
	rp := New(nil, http.DefaultTransport, nil)
	if rp.BufferPool == nil {
		t.Error("New: BufferPool = nil, want a pool (else every answer allocates 32 KiB)")
	}
}

func TestNewTransport_DoesNotAskForCompression(t *testing.T) {
	if tr := NewTransport(TransportOptions{}); !tr.DisableCompression {
		t.Error("NewTransport: DisableCompression = false, want true (the box's own Accept-Encoding goes upstream)")
	}
}
