// Package secrets seals credentials and egress secrets at rest with
// AES-256-GCM under the broker's master key, and loads that key.
//
// The master key comes from BOXBROKER_MASTER_KEY (64 hex characters or
// base64 of 32 bytes) or from a key file in the data directory, created
// with mode 0600 on first run. Every sealed value is bound to what it is
// (its additional data names the row), so a sealed value copied to another
// row does not open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/intentius/boxbroker/internal/filelock"
)

// KeyFile is the master key file's name in the data directory.
const KeyFile = "master.key"

// version prefixes every sealed value, so the format can change.
const version byte = 1

// ErrOpen is returned for a sealed value that does not open under this key
// and additional data: a wrong master key, a corrupt value, or a value
// moved to another row.
var ErrOpen = errors.New("sealed value does not open with this master key")

// Keyring seals and opens values under one master key. It is safe for
// concurrent use.
type Keyring struct {
	aead cipher.AEAD
}

// New returns a Keyring for a 32-byte key.
func New(key []byte) (*Keyring, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("master key is %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return &Keyring{aead: aead}, nil
}

// Load returns the Keyring for envKey when it is set (hex or base64 of 32
// bytes), or for the key file in dataDir, creating that file with a fresh
// random key and mode 0600 when it does not exist. created reports whether
// it made a new key file.
func Load(dataDir, envKey string) (k *Keyring, created bool, err error) {
	if envKey != "" {
		k, err := parseKey(envKey, "BOXBROKER_MASTER_KEY")
		return k, false, err
	}
	path := filepath.Join(dataDir, KeyFile)
	b, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, err := createKeyFile(dataDir, path)
		if !errors.Is(err, fs.ErrExist) {
			return k, err == nil, err
		}
		// Another process made it first; or a link to no file is
		// there, which is read once more, not made again and again.
		if b, err = readKeyFile(path); errors.Is(err, fs.ErrNotExist) {
			return nil, false, fmt.Errorf("master key file %s is a link to no file; put the key where it leads, or remove the link", path)
		}
	}
	if err != nil {
		return nil, false, err
	}
	k, err = parseKey(strings.TrimSpace(string(b)), "master key file "+path)
	return k, false, err
}

// createKeyFile makes the key file path in dataDir with a fresh random
// key and mode 0600, and returns its Keyring; an error wrapping
// fs.ErrExist when a file (or a link) is at path.
func createKeyFile(dataDir, path string) (*Keyring, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make master key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create master key file: %w", err)
	}
	// The key and its name are synced before a value is sealed with it:
	// a key file lost in a power cut, or left empty, after the store
	// took such a value, would leave it unopenable.
	_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
	if werr == nil {
		werr = syncFile(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = syncDir(dataDir)
	}
	if werr != nil {
		return nil, fmt.Errorf("write master key file: %w", werr)
	}
	return New(key)
}

// maxKeyFile bounds what readKeyFile reads: a key is 64 hex characters,
// or base64 of 32 bytes, and a line's end.
const maxKeyFile = 4096

// readKeyFile reads the master key file at path, judging the file it
// opened (its fstat), never the name again: a file that is not a
// regular one (a FIFO, a device, a directory) is refused, as is one its
// group or others may read, one that belongs to a user other than the
// process's own and root (as ssh refuses such a key: its owner knows the
// key, and a process of root's reads a private file of anyone's), or one
// larger than maxKeyFile. A link is
// followed, and the file it leads to judged so. The file is opened
// without waiting (filelock.OpenRead), so a FIFO in its place is refused
// rather than waited on for a writer. An error opening it wraps the
// open's (fs.ErrNotExist for none).
func readKeyFile(path string) ([]byte, error) {
	f, err := filelock.OpenRead(path)
	if errors.Is(err, filelock.ErrNotRegular) {
		return nil, fmt.Errorf("master key file %s: %w; put the key in a regular file of mode 0600, or set BOXBROKER_MASTER_KEY", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("master key file %s is readable by others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	if uid, ok := filelock.Owner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return nil, fmt.Errorf("master key file %s belongs to user %d, not to this process's user (%d) nor root, so its owner knows the key and can change it; chown it to boxbroker's user", path, uid, os.Geteuid())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read master key file: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("master key file %s is larger than %d bytes, far more than a key: not a master key file", path, maxKeyFile)
	}
	return b, nil
}

// syncFile and syncDir sync a file and a directory (the names made in
// it) to the disk. A test replaces them.
var (
	syncFile = (*os.File).Sync
	syncDir  = filelock.SyncDir
)

// parseKey returns the Keyring for s, a key of 32 bytes as 64 hex
// characters or base64; where names s in the error of one that is not.
func parseKey(s, where string) (*Keyring, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return New(b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			return New(b)
		}
	}
	return nil, fmt.Errorf("%s: not 32 bytes as 64 hex characters or base64", where)
}

// Seal encrypts plaintext bound to ad, which names the row it is kept in.
func (k *Keyring) Seal(plaintext []byte, ad string) ([]byte, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	out := make([]byte, 0, 1+len(nonce)+len(plaintext)+k.aead.Overhead())
	out = append(out, version)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, plaintext, []byte(ad)), nil
}

// Open decrypts a value Seal made with the same ad, or returns ErrOpen.
func (k *Keyring) Open(sealed []byte, ad string) ([]byte, error) {
	n := k.aead.NonceSize()
	if len(sealed) < 1+n+k.aead.Overhead() || sealed[0] != version {
		return nil, ErrOpen
	}
	pt, err := k.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(ad))
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// Zero overwrites b, for plaintext a caller is done with.
func Zero(b []byte) { clear(b) }

// SecretAD is the additional data a box's egress secret is sealed with,
// so that a sealed value copied to another box or name does not open.
func SecretAD(box, name string) string { return "secret:" + box + "/" + name }
