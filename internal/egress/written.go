package egress

import (
	"context"
	"encoding/base64"
	"errors"
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

// written is what the broker wrote to each host, for a while: the plain
// values it sent there, the minted secrets whose tokens it sent there
// (the tokens themselves are the Minter's Kept), and the signatures it
// made for requests to it, for every box. A host may keep any of them (a
// box puts its token in an issue body, and the broker writes the value
// there) and hand it back in a later answer, through any secret pinned
// to it: every answer from a host is searched for all of them.
//
// Hosts are told apart by name alone, not by scheme or port: two
// services on one name often share their state.
type written struct {
	mu    sync.Mutex                   // guards hosts
	hosts map[string]map[string]*wrote // host name → box + "/" + secret name → what was written
}

// wrote is what the broker wrote to one host for one secret of one box.
type wrote struct {
	box    string
	ref    *mint.Ref // a minted kind's, whose tokens Minter.Kept holds
	values []held    // plain values, oldest first
	signed []held    // signatures and the headers holding them, oldest first
}

// held is a value, until it is no longer kept.
type held struct {
	v     string
	until time.Time
}

// hostKey is the name hosts are told apart by: the host name of base,
// lower case.
func hostKey(host string) string { return strings.ToLower(host) }

// entryLocked returns host's entry for box's secret name, made when new.
func (w *written) entryLocked(host, box, name string) *wrote {
	if w.hosts == nil {
		w.hosts = map[string]map[string]*wrote{}
	}
	secs := w.hosts[host]
	if secs == nil {
		secs = map[string]*wrote{}
		w.hosts[host] = secs
	}
	e := secs[box+"/"+name]
	if e == nil {
		e = &wrote{box: box}
		secs[box+"/"+name] = e
	}
	return e
}

// keep adds v, held until until, to ks, keeping at most n, and returns
// it: a value already there is held until the later of its two ends.
func keep(ks []held, v string, until time.Time, n int, now time.Time) []held {
	ks = live(ks, now)
	for i := range ks {
		if ks[i].v == v {
			if until.After(ks[i].until) {
				ks[i].until = until
			}
			return ks
		}
	}
	ks = append(ks, held{v: v, until: until})
	if len(ks) > n {
		ks = append(ks[:0], ks[len(ks)-n:]...)
	}
	return ks
}

// live is ks without what is past its end.
func live(ks []held, now time.Time) []held {
	out := ks[:0]
	for _, k := range ks {
		if now.Before(k.until) {
			out = append(out, k)
		}
	}
	clear(ks[len(out):])
	return out
}

// sentValue records that value, box's secret name's plain value, was
// sent to host.
func (w *written) sentValue(host, box, name, value string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entryLocked(host, box, name)
	e.values = keep(e.values, value, now.Add(keptValue), maxValues, now)
}

// sentMinted records that a token of the minted secret ref was sent to
// host.
func (w *written) sentMinted(host string, ref mint.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entryLocked(host, ref.Box, ref.Name)
	e.ref = &ref
}

// signed records the values made to sign a request of box's secret name
// to host, held until until.
func (w *written) signed(host, box, name string, made []string, until, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entryLocked(host, box, name)
	for _, v := range made {
		if len(v) >= minKept {
			e.signed = keep(e.signed, v, until, MaxSigned, now)
		}
	}
}

// each calls f with a copy of every entry of host still holding
// something, and drops those that hold nothing.
func (w *written) each(host string, now time.Time, f func(wrote)) {
	w.mu.Lock()
	var es []wrote
	for k, e := range w.hosts[host] {
		e.values, e.signed = live(e.values, now), live(e.signed, now)
		if len(e.values) == 0 && len(e.signed) == 0 && e.ref == nil {
			delete(w.hosts[host], k)
			continue
		}
		es = append(es, wrote{box: e.box, ref: e.ref, values: append([]held(nil), e.values...), signed: append([]held(nil), e.signed...)})
	}
	w.mu.Unlock()
	for _, e := range es {
		f(e)
	}
}

// formList gathers answer forms, each Old once: the first one added for
// a string is the one kept.
type formList struct {
	forms []proxy.Form
	seen  map[string]bool
}

func (l *formList) add(old, new string) {
	if len(old) < minKept || l.seen[old] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[old] = true
	l.forms = append(l.forms, proxy.Form{Old: []byte(old), New: []byte(new), Escaped: true})
}

// value adds the forms of a value the broker sent: the value, escaped or
// not, replaced by with, and its base64 in every alignment, replaced by
// [redacted].
func (l *formList) value(v, with string) {
	l.add(v, with)
	for _, c := range base64Cores(v) {
		l.add(c, redacted)
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

// hostForms are the forms of every value, beyond the request's own, that
// a box could have had host keep and that an answer from it to box must
// not carry: the values of every secret of box pinned to host (sec among
// them), read from the store (a plain value, a minted kind's tokens still
// within their life, a configuration's own secrets), replaced by the
// box's token or [redacted]; and what the broker wrote there for any box
// (plain values, tokens, signatures), box's own by its token, another
// box's by [redacted]. It fails only when the store cannot be read.
func (c *Capability) hostForms(ctx context.Context, box, token string, sec store.Secret, host string) ([]proxy.Form, error) {
	var l formList
	secs, err := c.listing(ctx, box, sec.Name)
	if err != nil {
		return nil, err
	}
	for _, s := range secs {
		u, err := protocol.ParseSecretHost(s.Host)
		if err != nil || hostKey(u.Hostname()) != host {
			continue
		}
		if s.Name == sec.Name {
			s = sec
		} else if s, err = c.cfg.Secrets.Secret(ctx, box, s.Name); errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		c.secretForms(&l, box, token, s)
	}
	c.written.each(host, c.now(), func(w wrote) {
		with := redacted
		if w.box == box {
			with = token
		}
		for _, v := range w.values {
			l.value(v.v, with)
		}
		for _, v := range w.signed {
			l.add(v.v, redacted)
		}
		if w.ref != nil {
			c.keptForms(&l, *w.ref, with)
		}
	})
	return l.forms, nil
}

// secretForms adds to l the forms of box's secret sec: its plain value,
// by token; a minted kind's tokens, by token, and what its mints sent,
// by [redacted]; a configuration's own secrets, by [redacted].
func (c *Capability) secretForms(l *formList, box, token string, sec store.Secret) {
	plain, err := c.cfg.Keyring.Open(sec.Sealed, secrets.SecretAD(box, sec.Name))
	if err != nil {
		return // no value the broker could have sent
	}
	defer secrets.Zero(plain)
	switch sec.Kind {
	case "":
		l.value(string(plain), token)
		return
	case mint.KindGitHubApp:
		// Its key never leaves the broker: nothing of the configuration
		// to search for, and no need to parse the key.
	default:
		spec, err := mint.Parse(sec.Kind, plain)
		if err != nil {
			return
		}
		for _, v := range spec.Secrets() {
			l.add(v, redacted)
		}
	}
	if sec.Kind == mint.KindGitHubApp || sec.Kind == mint.KindOAuth2 {
		c.keptForms(l, mint.Ref{Box: box, Name: sec.Name, Of: mint.Of(sec.Sealed)}, token)
	}
}

// keptForms adds to l the forms of what the minter keeps for ref: its
// tokens, by with, and what its mints sent, by [redacted].
func (c *Capability) keptForms(l *formList, ref mint.Ref, with string) {
	tokens, sent := c.minter.Kept(ref)
	for _, v := range tokens {
		l.value(v, with)
	}
	for _, v := range sent {
		l.add(v, redacted)
	}
}

// listing returns box's secrets as List reads them: read again when the
// last reading is older than listFor or lacks the secret name. With no
// List it is none. When the store cannot be read it is the last reading,
// or the error when there is none.
func (c *Capability) listing(ctx context.Context, box, name string) ([]store.Secret, error) {
	if c.cfg.List == nil {
		return nil, nil
	}
	now := c.now()
	c.mu.Lock()
	l, ok := c.lists[box]
	c.mu.Unlock()
	if ok && now.Sub(l.at) < listFor && !now.Before(l.at) && slices.ContainsFunc(l.secs, func(s store.Secret) bool { return s.Name == name }) {
		return l.secs, nil
	}
	secs, err := c.cfg.List.ListSecrets(ctx, box)
	if err != nil {
		if ok {
			c.log.Warn("egress: cannot list the box's secrets; using the last listing", "box", box, "err", err)
			return l.secs, nil
		}
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists == nil || len(c.lists) >= maxLists {
		c.lists = map[string]listing{}
	}
	c.lists[box] = listing{at: now, secs: secs}
	return secs, nil
}
