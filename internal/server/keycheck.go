package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// keyCheckBoxes bounds the boxes whose secrets checkKeyring looks at when
// the store holds no credential and no pool entry: enough to find a
// sealed value in any store that has one, few enough that a start or a
// command on a fleet of boxes with no secrets stays quick.
const keyCheckBoxes = 100

// checkKeyring refuses a master key that does not open a value already
// sealed in st — the first credential (the shared one, an owner's or a
// visitor's), else the first pool entry, else the first secret among the
// first keyCheckBoxes boxes — as when replicas or the CLI were given
// different keys: serving with it would fail every call that value pays
// for, and sealing with it would store a value no replica opens. A store
// holding no sealed value takes any key.
func checkKeyring(ctx context.Context, st store.Store, k *secrets.Keyring) error {
	sealed, ad, what, err := firstSealed(ctx, st)
	if err != nil {
		return fmt.Errorf("check the master key: %w", err)
	}
	if sealed == nil {
		return nil
	}
	plain, err := k.Open(sealed, ad)
	if err != nil {
		return &keyMismatch{key: "the master key", what: what}
	}
	secrets.Zero(plain)
	return nil
}

// keyMismatch is checkKeyring's error: key (its words for the master key)
// does not open what.
type keyMismatch struct {
	key, what string
}

func (e *keyMismatch) Error() string {
	return fmt.Sprintf("%s does not open the stored %s: every replica and every "+
		"boxbroker command on this store needs the same master key (set BOXBROKER_MASTER_KEY alike everywhere)", e.key, e.what)
}

// firstSealed finds a value sealed in st, with its additional data and
// words naming it; sealed is nil when st holds none.
func firstSealed(ctx context.Context, st store.Store) (sealed []byte, ad, what string, err error) {
	creds, err := st.ListCredentials(ctx)
	if err != nil {
		return nil, "", "", err
	}
	for _, c := range creds {
		c, err := st.Credential(ctx, c.ID)
		if errors.Is(err, store.ErrNotFound) { // removed meanwhile
			continue
		}
		if err != nil {
			return nil, "", "", err
		}
		return c.Sealed, payer.AD(c.ID), fmt.Sprintf("credential %q", c.ID), nil
	}
	entries, err := st.PoolEntries(ctx)
	if err != nil {
		return nil, "", "", err
	}
	for _, e := range entries {
		if len(e.Sealed) > 0 {
			return e.Sealed, pool.AD(e.Name), fmt.Sprintf("pool entry %q", e.Name), nil
		}
	}
	boxes, err := st.ListBoxes(ctx)
	if err != nil {
		return nil, "", "", err
	}
	for i, b := range boxes {
		if i == keyCheckBoxes {
			break
		}
		list, err := st.ListSecrets(ctx, b.Name)
		if err != nil {
			return nil, "", "", err
		}
		for _, l := range list {
			sec, err := st.Secret(ctx, b.Name, l.Name)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, "", "", err
			}
			return sec.Sealed, secrets.SecretAD(b.Name, l.Name), fmt.Sprintf("secret %s of box %s", l.Name, b.Name), nil
		}
	}
	return nil, "", "", nil
}

// SealingKeyring returns the master key cfg names, for a command about to
// seal a value into st, after the check a replica makes at its start: it
// must open what st holds sealed already. When it does not, nothing is
// written — a key file it had to create in the data directory
// (BOXBROKER_MASTER_KEY unset and no master.key there) is removed again —
// and the error names the key it used and BOXBROKER_MASTER_KEY.
func SealingKeyring(ctx context.Context, cfg *Config, st store.Store) (*secrets.Keyring, error) {
	k, created, err := loadKeyring(cfg)
	if err != nil {
		return nil, err
	}
	err = checkKeyring(ctx, st, k)
	if err == nil {
		return k, nil
	}
	keyFile := filepath.Join(cfg.DataDir, secrets.KeyFile)
	if created {
		_ = os.Remove(keyFile)
	}
	var km *keyMismatch
	if !errors.As(err, &km) {
		return nil, err
	}
	km.key = "the master key in BOXBROKER_MASTER_KEY"
	if cfg.MasterKey == "" {
		km.key = fmt.Sprintf("the master key file %s (BOXBROKER_MASTER_KEY is unset)", keyFile)
		if created {
			km.key = fmt.Sprintf("a new master key (BOXBROKER_MASTER_KEY is unset and %s has no %s)", cfg.DataDir, secrets.KeyFile)
		}
	}
	return nil, fmt.Errorf("refused, nothing written: %w", km)
}
