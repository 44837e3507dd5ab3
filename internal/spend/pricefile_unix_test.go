//go:build unix

package spend

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/filelock"
)

// TestLoadPrices_FIFOIsRefused: a FIFO given as the price file (or put
// at its path) is refused at once, naming it, rather than waited on
// for a writer, which held serve at its start for as long as none came;
// a device is refused too, not read.
func TestLoadPrices_FIFOIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "prices.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadPrices(fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, filelock.ErrNotRegular) || !strings.Contains(err.Error(), fifo) {
			t.Errorf("LoadPrices(a FIFO) = %v, want ErrNotRegular naming it", err)
		}
	case <-time.After(5 * time.Second):
		// Free the waiting open, so that the test ends.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("LoadPrices(a FIFO) still waits after 5 s, want a refusal at once")
	}
	if _, err := LoadPrices(os.DevNull); !errors.Is(err, filelock.ErrNotRegular) {
		t.Errorf("LoadPrices(%s) = %v, want ErrNotRegular", os.DevNull, err)
	}
}
