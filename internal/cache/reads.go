package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/intentius/boxbroker/internal/hold"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// The reads a Cache answers, from memory while it is fresh, and the
// keys it keeps them under.

// BoxByTokenHash returns the box whose token hashes to hash, or
// store.ErrNotFound.
func (c *Cache) BoxByTokenHash(ctx context.Context, hash string) (store.Box, error) {
	return cached(ctx, c, "box", hash, &c.boxes, &c.missing, func(b store.Box) {
		if _, kept := c.boxes[hash]; !kept {
			c.byName[b.Name] = append(c.byName[b.Name], hash)
		}
	}, func(ctx context.Context) (store.Box, error) { return c.st.BoxByTokenHash(ctx, hash) })
}

// Declaration returns a box's last kept report, the one a request of the
// box admitted with the token that hashes to tokenHash is judged by, or
// nil when it never reported; store.ErrNotFound when the box no longer
// holds that token: the store's DeclarationOfToken, kept under the
// token's hash, so that a box removed and another added under its name
// (or its token replaced), which memory has not yet heard of, is judged
// by neither's report on the other's request. The result is shared and
// must not be modified.
func (c *Cache) Declaration(ctx context.Context, box, tokenHash string) (*protocol.Declaration, error) {
	return cached(ctx, c, "declaration", declKey{box, tokenHash}, &c.decls, nil, nil, func(ctx context.Context) (*protocol.Declaration, error) {
		doc, at, err := c.st.DeclarationOfToken(ctx, box, tokenHash)
		if err != nil || doc == nil {
			return nil, err
		}
		d := &protocol.Declaration{}
		if err := json.Unmarshal(doc, d); err != nil {
			return nil, fmt.Errorf("declaration of %s: %w", box, err)
		}
		d.At = at
		return d, nil
	})
}

// declKey is what a report is kept under: its box, and the hash of the
// token of the request that read it.
type declKey struct{ box, tokenHash string }

// String names the key in the flight of its read.
func (k declKey) String() string { return k.box + "\x00" + k.tokenHash }

// Budgeted reports whether the box named box, enrolled at created (its
// CreatedAt), has any budget, its own or a principal's on it: a model
// call of a box with none reserves nothing, so it need not ask the
// store. It is kept by the box as enrolled, so that a box added under
// the name of one removed, which memory has not yet heard of, is not
// taken to have none because the removed box had none.
func (c *Cache) Budgeted(ctx context.Context, box string, created time.Time) (bool, error) {
	return cached(ctx, c, "budgeted", enrolment{box, created.UnixMicro()}, &c.budgeted, nil, nil, func(ctx context.Context) (bool, error) {
		bs, err := c.st.ListBudgets(ctx, box)
		if err != nil || len(bs) > 0 {
			return len(bs) > 0, err
		}
		ws, err := c.st.ListWindowBudgets(ctx, box)
		return len(ws) > 0, err
	})
}

// enrolment is a box as it was enrolled: its name, and its CreatedAt in
// Unix microseconds (the store's precision).
type enrolment struct {
	box     string
	created int64
}

// String names the key in the flight of its read.
func (k enrolment) String() string { return k.box + "\x00" + strconv.FormatInt(k.created, 10) }

// dropBudgeted forgets whether the boxes named box have budgets, with
// c.mu held.
func dropBudgeted(c *Cache, box string) {
	maps.DeleteFunc(c.budgeted, func(k enrolment, _ bool) bool { return k.box == box })
}

// Credential returns the sealed credential with that ID, or store.ErrNotFound.
func (c *Cache) Credential(ctx context.Context, id string) (store.Credential, error) {
	return cached(ctx, c, "credential", id, &c.creds, &c.credMiss, nil, func(ctx context.Context) (store.Credential, error) { return c.st.Credential(ctx, id) })
}

// SecretOfToken returns a box's sealed egress secret for a request of
// the box admitted with the token that hashes to tokenHash, or
// store.ErrNotFound: the store's SecretOfToken, which reads it only
// while the box holds that token, kept under the token's hash.
func (c *Cache) SecretOfToken(ctx context.Context, box, tokenHash, name string) (store.Secret, error) {
	return cached(ctx, c, "secret", secretKey{box, name, tokenHash}, &c.secrets, &c.secMiss, nil, func(ctx context.Context) (store.Secret, error) {
		return c.st.SecretOfToken(ctx, box, tokenHash, name)
	})
}

// CredentialOfToken returns the sealed credential with that ID, a box's
// own (an owner's), for a request of the box admitted with the token that
// hashes to tokenHash, or store.ErrNotFound: the store's
// CredentialOfToken, which reads it only while the box holds that token,
// kept under the token's hash.
func (c *Cache) CredentialOfToken(ctx context.Context, id, box, tokenHash string) (store.Credential, error) {
	return cached(ctx, c, "box credential", credKey{id, box, tokenHash}, &c.boxCreds, &c.boxMiss, nil, func(ctx context.Context) (store.Credential, error) {
		return c.st.CredentialOfToken(ctx, id, box, tokenHash)
	})
}

// credKey is what a box's own credential is kept under: its ID, its box,
// and the hash of the token of the request that read it.
type credKey struct{ id, box, tokenHash string }

// String names the key in the flight of its read.
func (k credKey) String() string { return k.id + "\x00" + k.box + "\x00" + k.tokenHash }

// dropBoxCreds forgets the boxes' own credentials, and the missing ones,
// whose keys drop says to, with c.mu held.
func dropBoxCreds(c *Cache, drop func(credKey) bool) {
	maps.DeleteFunc(c.boxCreds, func(k credKey, _ store.Credential) bool { return drop(k) })
	maps.DeleteFunc(c.boxMiss, func(k credKey, _ struct{}) bool { return drop(k) })
}

// secretKey is what a secret is kept under: its box, its name, and the
// hash of the token of the request that read it.
type secretKey struct{ box, name, tokenHash string }

// String names the key in the flight of its read.
func (k secretKey) String() string { return k.box + "/" + k.name + "\x00" + k.tokenHash }

// dropSecrets forgets the secrets, and the missing ones, whose keys drop
// says to, with c.mu held.
func dropSecrets(c *Cache, drop func(secretKey) bool) {
	maps.DeleteFunc(c.secrets, func(k secretKey, _ store.Secret) bool { return drop(k) })
	maps.DeleteFunc(c.secMiss, func(k secretKey, _ struct{}) bool { return drop(k) })
}

// cached is how every read of the cache goes: from memory while it is
// fresh (*hitsAt, or *missesAt as store.ErrNotFound), else from load, once for
// all callers through shared. What load found is kept in *hitsAt (keep, if
// not nil, is called first, with c.mu held); store.ErrNotFound is kept in
// *missesAt, up to maxMissing of them (a new one taking an old one's place
// once it is full), when missesAt is not nil, and returned
// otherwise as any other error. Nothing is kept when a drop came while
// load ran. hitsAt and missesAt point at the cache's fields, read only
// under c.mu: a reset replaces the maps, and a read must not answer from
// ones it threw away.
func cached[K comparable, V any](ctx context.Context, c *Cache, kind string, key K, hitsAt *map[K]V, missesAt *map[K]struct{}, keep func(V), load func(context.Context) (V, error)) (V, error) {
	var zero V
	c.mu.RLock()
	ok, gen := c.fresh()
	if ok {
		if v, hit := (*hitsAt)[key]; hit {
			c.mu.RUnlock()
			return v, nil
		}
		if missesAt != nil {
			if _, miss := (*missesAt)[key]; miss {
				c.mu.RUnlock()
				return zero, store.ErrNotFound
			}
		}
	}
	c.mu.RUnlock()
	v, err := shared(ctx, c, kind, gen, keyName(key), load)
	if err != nil && (missesAt == nil || !errors.Is(err, store.ErrNotFound)) {
		return zero, err
	}
	c.mu.Lock()
	if ok && c.gen == gen {
		if err == nil {
			if keep != nil {
				keep(v)
			}
			(*hitsAt)[key] = v
		} else {
			if len(*missesAt) >= maxMissing {
				// Full: one kept miss makes way, whichever the map gives
				// first, so that misses a client sends at random cannot
				// keep the misses that recur (a box left with a removed
				// token, asking again and again) from being kept.
				for k := range *missesAt {
					delete(*missesAt, k)
					break
				}
			}
			(*missesAt)[key] = struct{}{}
		}
	}
	c.mu.Unlock()
	return v, err
}

// keyName is key as a string: itself, or what its String method says.
func keyName[K comparable](key K) string {
	switch k := any(key).(type) {
	case string:
		return k
	case fmt.Stringer:
		return k.String()
	}
	return fmt.Sprint(key)
}

// shared runs read, the store read behind a miss on key (of kind, at the
// cache's generation gen), once for every caller that misses on the same
// key at the same generation while it runs; each caller gets its result,
// or leaves with its own context's error when that ends first. A read
// that began before a drop is not shared with a caller that came after it
// (the generation is in the key), so what a caller keeps is never older
// than the drop it saw. The read runs on a context of its own, without the
// first caller's cancellation, so one caller leaving does not fail the
// others; the store's own deadline bounds it.
func shared[T any](ctx context.Context, c *Cache, kind string, gen uint64, key string, read func(context.Context) (T, error)) (T, error) {
	return hold.Shared(ctx, &c.flights, flightKey(kind, gen, key), func() (T, error) { return read(context.WithoutCancel(ctx)) })
}

// flightKey names the store read of key, of kind, at generation gen.
func flightKey(kind string, gen uint64, key string) string {
	return kind + "\x00" + strconv.FormatUint(gen, 10) + "\x00" + key
}

// dropDecls forgets box's reports, under every token's hash, with c.mu
// held.
func dropDecls(c *Cache, box string) {
	maps.DeleteFunc(c.decls, func(k declKey, _ *protocol.Declaration) bool { return k.box == box })
}
