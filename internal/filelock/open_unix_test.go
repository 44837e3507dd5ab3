//go:build unix

package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpen_JudgesTheFileOpened: Open refuses a link at its path (not
// followed to the file it leads to, which is left as it was, mode and
// content), a FIFO (not waited on for a writer) and a directory, each
// wrapping ErrNotRegular and naming the path; it opens and makes a
// regular file.
func TestOpen_JudgesTheFileOpened(t *testing.T) {
	dir := t.TempDir()
	theirs := filepath.Join(t.TempDir(), "operators-file")
	if err := os.WriteFile(theirs, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(theirs, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	for _, c := range []struct {
		name, p, words string
		flag           int
	}{
		{"a link, to truncate", link, "a link", os.O_WRONLY | os.O_CREATE | os.O_TRUNC},
		{"a link, to append to", link, "a link", os.O_RDWR | os.O_CREATE | os.O_APPEND},
		{"a link, to read", link, "a link", os.O_RDONLY},
		{"a FIFO, to read", fifo, "a FIFO", os.O_RDONLY},
		{"a FIFO, to write", fifo, "", os.O_WRONLY | os.O_CREATE},
		{"a FIFO, to read and write", fifo, "a FIFO", os.O_RDWR | os.O_CREATE},
		{"a directory", dir, "a directory", os.O_RDONLY},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Open(c.p, c.flag, 0o600)
			if err == nil {
				f.Close()
				t.Fatalf("Open(%s) opened it", c.p)
			}
			if c.words == "" {
				return // refused by the open itself (ENXIO: no reader)
			}
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.words) || !strings.Contains(err.Error(), c.p) {
				t.Errorf("Open(%s) = %v, want ErrNotRegular naming it and %q", c.p, err, c.words)
			}
		})
	}
	if b, err := os.ReadFile(theirs); err != nil || string(b) != "kept\n" {
		t.Errorf("the file the link leads to holds %q, %v; want it kept", b, err)
	}
	if fi, err := os.Stat(theirs); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file the link leads to is %v, %v; want its mode kept", fi.Mode(), err)
	}
	f, err := Open(filepath.Join(dir, "new"), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("Open of a new file: %v", err)
	}
	f.Close()
}

// TestReadFile_JudgesTheFileOpened: ReadFile follows a link to a regular
// file and reads it, and refuses a FIFO (not waited on for a writer), a
// link to a device, and a file over its bound, none naming the path.
func TestReadFile_JudgesTheFileOpened(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept")
	if err := os.WriteFile(kept, []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(kept, link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(link, 3); err != nil || string(b) != "pem" {
		t.Errorf("ReadFile through a link to a file = %q, %v; want its content", b, err)
	}
	if _, err := ReadFile(kept, 2); err == nil || !strings.Contains(err.Error(), "larger than 2 bytes") || strings.Contains(err.Error(), kept) {
		t.Errorf("ReadFile of a file over its bound = %v; want a refusal not naming it", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	dev := filepath.Join(dir, "dev")
	if err := os.Symlink(os.DevNull, dev); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dev} {
		if _, err := ReadFile(p, 1<<20); !errors.Is(err, ErrNotRegular) || strings.Contains(err.Error(), p) {
			t.Errorf("ReadFile(%s) = %v; want ErrNotRegular, not naming it", p, err)
		}
	}
}

// TestOpen_HardLinkIsNotWrittenThrough: a file at the path that has
// another name too (a hard link to a file of the operator's, made by a
// user who may write into the directory where fs.protected_hardlinks is
// 0) is refused when opened to write, truncate or append to, wrapping
// ErrHardLinked and naming the path, and the file is left as it was;
// opened to read, it is read.
func TestOpen_HardLinkIsNotWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	theirs := filepath.Join(dir, "master.key")
	if err := os.WriteFile(theirs, []byte("kept\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, ".readyz")
	if err := os.Link(theirs, link); err != nil {
		t.Skip("no hard link here:", err)
	}
	for _, flag := range []int{os.O_WRONLY | os.O_CREATE | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND, os.O_RDWR | os.O_CREATE | os.O_APPEND} {
		f, err := Open(link, flag, 0o600)
		if err == nil {
			f.Write([]byte("written\n"))
			f.Close()
		}
		if !errors.Is(err, ErrHardLinked) || !strings.Contains(err.Error(), link) {
			t.Errorf("Open(a hard link, %#o) = %v, want ErrHardLinked naming it", flag, err)
		}
	}
	if b, err := os.ReadFile(theirs); err != nil || string(b) != "kept\n" {
		t.Errorf("the file linked holds %q, %v; want it kept", b, err)
	}
	f, err := Open(link, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("Open(a hard link) to read = %v, want it opened", err)
	}
	f.Close()
}
