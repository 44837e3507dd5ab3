// Package diskfull is the full disk that the writes of outbox.AppendSynced
// meet while a test holds it (outboxtest.FailAppendsAfter). Only the
// outbox and its test support import it: no other package of the broker
// can fill the disk.
package diskfull

import (
	"errors"
	"os"
	"sync/atomic"
)

// keep is, while After holds, one more than the bytes a write keeps
// before it fails; 0 otherwise.
var keep atomic.Int64

// After makes every Write, until restore is called, keep only the first
// n bytes of what it is given and fail, as on a full disk.
func After(n int) (restore func()) {
	keep.Store(int64(n) + 1)
	return func() { keep.Store(0) }
}

// Write is f.Write(b), unless After holds.
func Write(f *os.File, b []byte) (int, error) {
	if n := keep.Load(); n > 0 {
		w, _ := f.Write(b[:min(int(n-1), len(b))])
		return w, errors.New("no space left on device")
	}
	return f.Write(b)
}
