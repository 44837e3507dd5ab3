package filelock

import (
	"fmt"
	"os"
)

// SyncDir syncs the directory dir: the names made, renamed or removed in
// it reach the disk, as a file's own Sync does not make its name outlive
// a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
