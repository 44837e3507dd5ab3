package auditsink

import (
	"errors"
	"os"
)

// FailWritesAfter makes the backlog's writes keep only their first n
// bytes and fail, until restore is called.
func FailWritesAfter(n int) (restore func()) {
	keep := writeBacklog
	writeBacklog = func(f *os.File, b []byte) (int, error) {
		w, _ := f.Write(b[:min(n, len(b))])
		return w, errors.New("no space left on device")
	}
	return func() { writeBacklog = keep }
}
