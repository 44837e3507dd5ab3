package egress

import (
	"context"
	"encoding/base64"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/mint"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// Bounds of what the broker keeps of what it wrote to hosts.
const (
	// keptValue is how long a plain value is held after it was last
	// sent to a host.
	keptValue = 24 * time.Hour
	// maxValues is how many plain values of one secret are kept: a
	// secret has one at a time, and more only when its owner sets it
	// again.
	maxValues = 8
	// keptSigned is how long a signature whose host accepts it for ever
	// (hmac with sign: body) is kept; others are held for their life
	// (mint.Signer.Life).
	keptSigned = 24 * time.Hour
	// MaxSigned is how many signatures of one secret are kept: the last
	// ones made, each for at most its life.
	MaxSigned = 256
	// minKept is the shortest value searched for beyond the request's
	// own: a shorter one would be found in ordinary text.
	minKept = 8
)

// written is what the broker wrote to each host for each box, for a
// while: the plain values it sent there, the minted secrets whose tokens
// it sent there (the tokens themselves are the Minter's Kept), and the
// signatures it made for requests to it. A value is written only where a
// credential goes (a header, the query, a field its secret names), but a
// host may keep it there (a request log, a webhook's last delivery, a
// query parameter it takes as data) and hand it back in a later answer
// to the same box, through any secret pinned to it. Each box's answers
// are searched for what was written for that box alone: what another box
// could read at a host, anyone with an account there could read too,
// unsearched.
//
// Hosts are told apart by name alone, not by scheme or port: two
// services on one name often share their state.
type written struct {
	mu    sync.Mutex            // guards boxes and swept
	boxes map[hostBox]*boxWrote // what was written to a host for a box
	swept time.Time             // when every entry's ends were last judged
}

// hostBox names a host, by hostKey, and a box.
type hostBox struct{ host, box string }

// boxWrote is what the broker wrote to one host for one box.
type boxWrote struct {
	// gen counts the plain values and minted secrets added: a search set
	// made from an earlier count lacks one.
	gen  uint64
	secs map[string]*wrote // by secret name
}

// wrote is what the broker wrote to one host for one secret of one box.
type wrote struct {
	ref    *mint.Ref // a minted kind's, whose tokens Minter.Kept holds
	values []held    // plain values, oldest first
	signed []held    // signatures, oldest first
}

// sweepEvery is how often, at most, written drops what is past its end
// for every box, those that never call again included.
const sweepEvery = 10 * time.Minute

// held is a value, until it is no longer kept.
type held struct {
	v     string
	until time.Time
}

// hostKey is the name hosts are told apart by: the host name of base,
// lower case, without the trailing dot of a fully qualified name
// (api.example.com. is api.example.com, the same host), as the HTTPS
// proxy compares names.
func hostKey(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }

// entryLocked returns host's entry for box's secret name, made when
// new, and the box's entry it is in.
func (w *written) entryLocked(host, box, name string, now time.Time) (*boxWrote, *wrote) {
	if now.Sub(w.swept) >= sweepEvery {
		w.sweepLocked(now)
	}
	if w.boxes == nil {
		w.boxes = map[hostBox]*boxWrote{}
	}
	b := w.boxes[hostBox{host, box}]
	if b == nil {
		b = &boxWrote{secs: map[string]*wrote{}}
		w.boxes[hostBox{host, box}] = b
	}
	e := b.secs[name]
	if e == nil {
		e = &wrote{}
		b.secs[name] = e
	}
	return b, e
}

// sweepLocked drops every value and signature past its end, and every
// entry left holding nothing.
func (w *written) sweepLocked(now time.Time) {
	w.swept = now
	for k, b := range w.boxes {
		for name, e := range b.secs {
			e.values, e.signed = live(e.values, now), live(e.signed, now)
			if len(e.values) == 0 && len(e.signed) == 0 && e.ref == nil {
				delete(b.secs, name)
			}
		}
		if len(b.secs) == 0 {
			delete(w.boxes, k)
		}
	}
}

// keep adds v, held until until, to ks, keeping at most n, and returns
// it and whether v is new: a value already there is held until the later
// of its two ends.
func keep(ks []held, v string, until time.Time, n int, now time.Time) ([]held, bool) {
	ks = live(ks, now)
	for i := range ks {
		if ks[i].v == v {
			if until.After(ks[i].until) {
				ks[i].until = until
			}
			return ks, false
		}
	}
	ks = append(ks, held{v: v, until: until})
	if len(ks) > n {
		ks = append(ks[:0], ks[len(ks)-n:]...)
	}
	return ks, true
}

// live is ks without what is past its end.
func live(ks []held, now time.Time) []held {
	return slices.DeleteFunc(ks, func(k held) bool { return !now.Before(k.until) })
}

// sentValue records that value, box's secret name's plain value, was
// sent to host.
func (w *written) sentValue(host, box, name, value string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, e := w.entryLocked(host, box, name, now)
	var added bool
	if e.values, added = keep(e.values, value, now.Add(keptValue), maxValues, now); added {
		b.gen++
	}
}

// sentMinted records that a token of the minted secret ref was sent to
// host.
func (w *written) sentMinted(host string, ref mint.Ref, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b, e := w.entryLocked(host, ref.Box, ref.Name, now)
	if e.ref == nil || *e.ref != ref {
		e.ref = &ref
		b.gen++
	}
}

// signed records the values made to sign a request of box's secret name
// to host, held until until.
func (w *written) signed(host, box, name string, made []string, until, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, e := w.entryLocked(host, box, name, now)
	for _, v := range made {
		if len(v) >= minKept {
			e.signed, _ = keep(e.signed, v, until, MaxSigned, now)
		}
	}
}

// gen is box's count at host (see boxWrote.gen).
func (w *written) gen(host, box string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.boxes[hostBox{host, box}]; b != nil {
		return b.gen
	}
	return 0
}

// mine returns what was written to host for box alone, still held: its
// plain values, the signatures made for its requests, its minted
// secrets, and its count.
func (w *written) mine(host, box string, now time.Time) (values, signed []string, refs []mint.Ref, gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.boxes[hostBox{host, box}]
	if b == nil {
		return nil, nil, nil, 0
	}
	for _, e := range b.secs {
		e.values, e.signed = live(e.values, now), live(e.signed, now)
		for _, v := range e.values {
			values = append(values, v.v)
		}
		for _, v := range e.signed {
			signed = append(signed, v.v)
		}
		if e.ref != nil {
			refs = append(refs, *e.ref)
		}
	}
	return values, signed, refs, b.gen
}

// formList gathers answer forms, each Old once: the first one added for
// a string is the one kept.
type formList struct {
	forms []proxy.Form
	seen  map[string]string // Old → what replaces it, own for the box's own
}

// own stands, in formList.seen, for the box's own token.
const own = "\x00own"

func (l *formList) addForm(f proxy.Form) {
	old := string(f.Old)
	if len(old) < minKept {
		return
	}
	if _, ok := l.seen[old]; ok {
		return
	}
	if l.seen == nil {
		l.seen = map[string]string{}
	}
	if f.Own {
		l.seen[old] = own
	} else {
		l.seen[old] = string(f.New)
	}
	l.forms = append(l.forms, f)
}

// value adds the forms of a value the broker sent: the value, escaped or
// not, replaced by the box's own token, and its base64 in every
// alignment, replaced by [redacted]; each whole or line-wrapped. (All
// wrapped, they are searched in one walk.)
func (l *formList) value(v string) {
	l.addForm(proxy.Form{Old: []byte(v), Own: true, Escaped: true, Wrapped: true})
	for _, c := range base64Cores(v) {
		l.addForm(proxy.Form{Old: []byte(c), New: []byte(redacted), Escaped: true, Wrapped: true})
	}
}

// base64Cores returns what is the same in every base64 encoding of a
// string holding v, whatever comes before and after it: for each of the
// three places v can begin in a three-byte group, the encoding of the
// whole groups of v from the first group boundary in it, in the standard
// and the URL alphabets. Any base64 of Basic credentials holding v (or
// of anything else that holds it) holds one of them: all of v but at
// most two bytes at each end.
func base64Cores(v string) []string {
	var out []string
	for skip := range 3 {
		if len(v)-skip < 6 {
			continue
		}
		whole := v[skip : skip+(len(v)-skip)/3*3]
		std := base64.StdEncoding.EncodeToString([]byte(whole))
		out = append(out, std)
		if u := base64.URLEncoding.EncodeToString([]byte(whole)); u != std {
			out = append(out, u)
		}
	}
	return out
}

// hostSet is a box's search set at a host, made once and kept for its
// calls there while nothing it was made from has changed: the values of
// the box's secrets pinned to the host (read from the store), the tokens
// minted for them still within their life, and the plain values and
// minted secrets written there for the box (see written), each with
// its base64. The box's own token is not in it: an answer's set has it
// as its own string (proxy.FormSet.WithOwn).
type hostSet struct {
	set  *proxy.FormSet
	seen map[string]string // every form's Old → what replaces it (own for the token)
	// What it was made from: the box's listing (as read at listed), the
	// sealed bytes of the box's secrets at the host, written's count.
	listed time.Time
	sealed map[string]string // secret name → sealed bytes
	gen    uint64
	used   time.Time // its last use, under Capability.mu
}

// Bounds of the search sets a Capability keeps.
const (
	// maxSets is how many boxes' sets at hosts are kept; past it, all
	// are dropped and made again as needed.
	maxSets = 4096
	// setIdle is how long a set is kept unused. Its values are the
	// secrets' plain values, held no longer than a call's search needs
	// them and this long after.
	setIdle = listFor
)

type setKey struct{ box, host string }

// hostForms returns box's search set at host for a request of its secret
// sec, whose value (plain, or a minted token) is value: the one kept
// when nothing it was made from has changed and it holds value,
// otherwise one made again and kept, the box's other secrets read for
// the request's token, whose hash is tokenHash. It fails only when the store cannot
// be read.
func (c *Capability) hostForms(ctx context.Context, box, tokenHash string, sec store.Secret, value, host string) (*hostSet, error) {
	l, err := c.listing(ctx, box, sec.Name)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	gen := c.written.gen(host, box)
	key := setKey{box, host}
	c.mu.Lock()
	hs := c.sets[key]
	if hs != nil && hs.listed.Equal(l.at) && hs.gen == gen && now.Sub(hs.used) < setIdle && !now.Before(hs.used) &&
		hs.sealed[sec.Name] == string(sec.Sealed) && (len(value) < minKept || hs.seen[value] == own) {
		hs.used = now
		c.mu.Unlock()
		return hs, nil
	}
	c.mu.Unlock()

	hs = &hostSet{listed: l.at, sealed: map[string]string{}, used: now}
	var fl formList
	if value != "" {
		fl.value(value)
	}
	for _, s := range l.secs {
		u, err := protocol.ParseSecretHost(s.Host)
		if err != nil || hostKey(u.Hostname()) != host {
			continue
		}
		if s.Name == sec.Name {
			s = sec
		} else if s, err = c.cfg.Secrets.SecretOfToken(ctx, box, tokenHash, s.Name); errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		hs.sealed[s.Name] = string(s.Sealed)
		c.secretForms(&fl, box, s)
	}
	hs.sealed[sec.Name] = string(sec.Sealed)
	values, _, refs, g := c.written.mine(host, box, now)
	hs.gen = g
	for _, v := range values {
		fl.value(v)
	}
	for _, ref := range refs {
		c.keptForms(&fl, ref)
	}
	hs.set, hs.seen = proxy.NewFormSet(fl.forms), fl.seen

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil || len(c.sets) >= maxSets {
		c.sets = map[setKey]*hostSet{}
	}
	if now.Sub(c.setsSwept) >= setIdle {
		c.setsSwept = now
		maps.DeleteFunc(c.sets, func(_ setKey, s *hostSet) bool { return now.Sub(s.used) >= setIdle })
	}
	c.sets[key] = hs
	return hs, nil
}

// secretForms adds to l the forms of box's secret sec: its plain value,
// or a minted kind's tokens, and what its mints sent the token endpoint,
// still within their life (keptForms). A configuration's own secrets are
// not searched for beyond the request they are sent with: an HMAC or AWS
// secret key never leaves the broker, and a client secret goes only to
// the token endpoint, never where a box's request puts it.
func (c *Capability) secretForms(l *formList, box string, sec store.Secret) {
	switch sec.Kind {
	case "":
		plain, err := c.cfg.Keyring.Open(sec.Sealed, secrets.SecretAD(box, sec.Name))
		if err != nil {
			return // no value the broker could have sent
		}
		l.value(string(plain))
		secrets.Zero(plain)
	case mint.KindGitHubApp, mint.KindOAuth2:
		c.keptForms(l, mint.Ref{Box: box, Name: sec.Name, Of: mint.Of(sec.Sealed)})
	}
}

// keptForms adds to l the tokens the minter keeps for ref, and, replaced
// by [redacted], what its mints sent the token endpoint (a GitHub App's
// JWT, a refresh token): the token endpoint may be the host's own server
// (a github-app secret's default api_url is its host), which may keep
// what it received and hand it back, and none of it is a token the
// box's requests carry.
func (c *Capability) keptForms(l *formList, ref mint.Ref) {
	tokens, sent := c.minter.Kept(ref)
	for _, v := range tokens {
		l.value(v)
	}
	for _, v := range sent {
		l.addForm(proxy.Form{Old: []byte(v), New: []byte(redacted), Escaped: true})
	}
}

// listing returns box's secrets as List reads them: read again when the
// last reading is older than listFor or lacks the secret name. With no
// List it is none. When the store cannot be read it is the last reading,
// or the error when there is none.
func (c *Capability) listing(ctx context.Context, box, name string) (listing, error) {
	if c.cfg.List == nil {
		return listing{}, nil
	}
	now := c.cfg.Now()
	c.mu.Lock()
	l, ok := c.lists[box]
	c.mu.Unlock()
	if ok && now.Sub(l.at) < listFor && !now.Before(l.at) && slices.ContainsFunc(l.secs, func(s store.Secret) bool { return s.Name == name }) {
		return l, nil
	}
	secs, err := c.cfg.List.ListSecrets(ctx, box)
	if err != nil {
		if ok {
			c.log.Warn("egress: cannot list the box's secrets; using the last listing", "box", box, "err", err)
			return l, nil
		}
		return listing{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists == nil || len(c.lists) >= maxLists {
		c.lists = map[string]listing{}
	}
	l = listing{at: now, secs: secs}
	c.lists[box] = l
	return l, nil
}
