package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/secrets"
)

// newKey is a fresh master key, hex, as BOXBROKER_MASTER_KEY takes it.
func newKey(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(k)
}

// sealingCommands are the commands that seal a value under the master
// key, each with its stdin.
var sealingCommands = []struct {
	name  string
	stdin string
	args  []string
}{
	{"credential set", "sk-ant-api03-OTHERKEY\n", []string{"credential", "set", "anthropic"}},
	{"credential add", "sk-ant-api03-OTHERKEY\n", []string{"credential", "add", "anthropic", "team-b"}},
	{"visitor set", "sk-ant-api03-OTHERKEY\n", []string{"visitor", "set", "github:vee"}},
	{"box payer owner", "sk-ant-api03-OTHERKEY\n", []string{"box", "payer", "salad", "owner", "--principal", "github:own"}},
	{"secret set", "longenoughvalue\n", []string{"secret", "set", "salad", "KEY", "--host", "https://api.example.com"}},
	{"proxy ca", "", []string{"proxy", "ca"}},
	{"proxy ca rotate", "", []string{"proxy", "ca", "rotate", "--yes"}},
}

// snapshot is what a data directory holds: each file's name and bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

// TestSeal_OtherMasterKeyRefused: on a store sealed with one master key,
// every command that seals refuses another key before it writes, naming
// BOXBROKER_MASTER_KEY (and never the key), as a replica refuses it at
// its start; the data directory is byte for byte as it was.
func TestSeal_OtherMasterKeyRefused(t *testing.T) {
	tests := []struct {
		name       string
		sealedWith string // "" for the key file master.key
		usedKey    func(t *testing.T) string
		wantSays   string
	}{
		{"store sealed with master.key, command given BOXBROKER_MASTER_KEY", "", newKey, "the master key in BOXBROKER_MASTER_KEY does not open"},
		{"store sealed with BOXBROKER_MASTER_KEY, command given none", newKey(t), func(*testing.T) string { return "" }, "BOXBROKER_MASTER_KEY is unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sealed := map[string]string{"BOXBROKER_DATA": dir, "BOXBROKER_MASTER_KEY": tt.sealedWith}
			if _, errs, code := runIn(t, sealed, "", "box", "add", "salad"); code != 0 {
				t.Fatalf("box add = %d %q", code, errs)
			}
			if _, errs, code := runIn(t, sealed, "sk-ant-api03-FIRSTKEY\n", "credential", "set", "anthropic"); code != 0 {
				t.Fatalf("credential set = %d %q", code, errs)
			}
			before := snapshot(t, dir)
			used := tt.usedKey(t)
			other := map[string]string{"BOXBROKER_DATA": dir, "BOXBROKER_MASTER_KEY": used}
			for _, c := range sealingCommands {
				_, errs, code := runIn(t, other, c.stdin, c.args...)
				if code != 1 || !strings.Contains(errs, "BOXBROKER_MASTER_KEY") || !strings.Contains(errs, tt.wantSays) ||
					!strings.Contains(errs, "nothing written") || (used != "" && strings.Contains(errs, used)) {
					t.Errorf("%s with another master key = %d %q, want refused (1), naming BOXBROKER_MASTER_KEY and saying %q", c.name, code, errs, tt.wantSays)
				}
				after := snapshot(t, dir)
				if len(after) != len(before) {
					t.Errorf("after a refused %s the data directory holds %d files, want the %d it had", c.name, len(after), len(before))
				}
				for name, b := range before {
					if after[name] != b {
						t.Errorf("after a refused %s, %s changed", c.name, name)
					}
				}
			}
			// With the store's own key every one of them seals.
			for _, c := range sealingCommands {
				if _, errs, code := runIn(t, sealed, c.stdin, c.args...); code != 0 {
					t.Errorf("%s with the store's own master key = %d %q, want 0", c.name, code, errs)
				}
			}
		})
	}
}

// TestSeal_SecretOnlyStoreChecked: a store whose only sealed value is a
// box's secret is checked too: another key is refused.
func TestSeal_SecretOnlyStoreChecked(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"BOXBROKER_DATA": dir}
	runIn(t, env, "", "box", "add", "salad")
	if _, errs, code := runIn(t, env, "longenoughvalue\n", "secret", "set", "salad", "KEY", "--host", "https://api.example.com"); code != 0 {
		t.Fatalf("secret set = %d %q", code, errs)
	}
	other := map[string]string{"BOXBROKER_DATA": dir, "BOXBROKER_MASTER_KEY": newKey(t)}
	_, errs, code := runIn(t, other, "sk-ant-api03-OTHERKEY\n", "credential", "set", "anthropic")
	if code != 1 || !strings.Contains(errs, "secret KEY of box salad") {
		t.Errorf("credential set with another key on a store holding a secret = %d %q, want refused naming the secret", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, secrets.KeyFile)); err != nil {
		t.Errorf("the store's own key file: %v", err)
	}
}
