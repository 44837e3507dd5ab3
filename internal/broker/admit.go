package broker

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/rule"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// admit finds the capability that serves r and applies the rule and the
// box's limits: it returns the capability, what it may know of the call
// and the release of the box's limit, or the refusal.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, info *requestInfo, hd *Handoff) (capability.Capability, *capability.Call, held, error) {
	// Nothing of the body is read until the token, read from the head,
	// is a box's (Scopes reads only the head), but for the small body a
	// route's BodyTokens reads when the head carries no token at all.
	f, err := s.routes.find(r)
	if f.c != nil {
		info.Capability, info.Route = f.c.Name(), f.label
		if hd != nil {
			info.Route = hd.Label + f.label
		}
	}
	if err != nil {
		return nil, nil, held{}, err
	}
	c, rt, need := f.c, f.rt, f.need
	info.Words = need.Words
	info.Public = need.Public
	rc := http.NewResponseController(w)
	if need.Public {
		s.boundBody(rc, r, info)
		return c, &info.admitted, held{}, nil
	}
	inBody := hd == nil && s.readBodyToken(rc, r, rt)
	info.from = s.source(r, hd)
	tok, adm, err := s.authenticate(r, rt, hd, info.from)
	if adm != nil {
		info.Box = adm.Box.Name
	}
	if err != nil {
		return nil, nil, held{}, err
	}
	box := adm.Box
	if rt.BodyScopes != nil {
		// A body read to choose the words (feedback's) is small: one
		// still arriving after BodyTimeout is a client holding a
		// connection.
		_ = rc.SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
		words, err := rt.BodyScopes(r)
		if err != nil {
			leaveBody(w, r) // over its bound, or stalled: read no more
			return nil, nil, held{}, err
		}
		need.Words = words
		info.Words = words
	}
	// Forwarded bodies stream afterwards, bounded by ReadTimeout.
	s.boundBody(rc, r, info)
	if err := adm.Require(need.Words); err != nil {
		return nil, nil, held{}, err
	}
	if s.cfg.Recording != nil {
		if err := s.cfg.Recording(); err != nil {
			return nil, nil, held{}, capability.Refuse(capability.ReasonCannotRecord, "The broker cannot record calls just now (neither its store nor its spool takes a write), so it serves none; try again shortly.").WithErr(err)
		}
	}
	h, err := s.limits.takeRated(box.Name, hd == nil || !hd.Counted)
	if err != nil {
		return nil, nil, held{}, err
	}
	if f.coding != "" {
		if err := decodeBody(w, r, rt.CodedLimit); err != nil {
			h.release()
			info.Reason = capability.ReasonEncoding
			return nil, nil, held{}, err
		}
	}
	info.judged.at = s.cfg.TokenNow()
	info.admitted = capability.Call{Box: box, Token: tok, TokenHash: adm.TokenHash, TokenInBody: inBody, Words: need.Words, Payer: s.cfg.Payer.Func(box, adm.TokenHash)}
	return c, &info.admitted, h, nil
}

// Admission is a box the broker has admitted for one capability; the
// scope words a request needs are judged against it by the rule
// (rule.Admission's Require and Refusal).
type Admission = rule.Admission

// AdmitBox applies the rule to the box whose token is tok, for the
// capability named name, up to the scope words: it finds the box,
// refuses its token from outside the addresses it is bound to (from,
// where the request came from; none, for a box bound to any address),
// past its expiry or past a rotation's grace, refuses it while its
// owner has it paused, and reads its last declaration report while it
// holds the token (refused as capability.TokenGone once it does not). The
// broker's handler admits every request so, and the HTTPS proxy
// (package egressproxy) every CONNECT and every open tunnel it judges
// again: the rule is applied around every capability, never inside one.
// The words are judged by the Admission's Require (or Refusal) once the
// caller knows them: a route's BodyScopes' from the body, the proxy's from the
// secrets pinned to a host.
//
// A token that is no box's ("" included) is returned as the token
// package's error (token.Refused reports true), for the caller to answer
// in its own way: a 403 on a capability's route, the proxy's 407. Every
// other refusal is a *capability.Error: a 403 of ReasonOutside or
// ReasonExpired, capability.Paused, or capability.Unavailable when the
// store does not answer. With a refusal of a box that is known, the
// Admission naming the box is returned too, for the caller's records.
func (s *Server) AdmitBox(ctx context.Context, tok, name string, from netip.Addr) (*Admission, error) {
	box, old, known, err := s.boxOf(ctx, tok, from)
	if !known {
		return nil, err
	}
	a := rule.Admit(box, s.cfg.Broker, name)
	a.TokenHash = heldHash(&box, old)
	if err != nil {
		return a, err
	}
	if box.Paused {
		return a, capability.Paused(box.Name)
	}
	// The report is read while the box holds the token: a box removed
	// and another added under its name, or its token replaced, since
	// memory last heard is judged by neither's report on the other's
	// request.
	a.Report, err = s.cfg.Cache.Declaration(ctx, box.Name, a.TokenHash)
	if errors.Is(err, store.ErrNotFound) {
		return a, capability.TokenGone(ctx, s.cfg.Store, box)
	}
	if err != nil {
		return a, capability.Unavailable(err)
	}
	return a, nil
}

// boxOf finds the box whose token is tok, through the cache, comparing
// the hashes in constant time, and judges the token (judgeToken) as sent
// from from. known is true when the token is a box's, whose refusal is
// returned with it; old, when it is the box's token before its last
// rotation. A token that is no box's ("" included) is returned as
// the token package's error (token.Refused), and a store that does not
// answer as capability.Unavailable.
func (s *Server) boxOf(ctx context.Context, tok string, from netip.Addr) (box store.Box, old, known bool, err error) {
	box, old, err = token.LookupEither(ctx, tok, s.cfg.Cache.BoxByTokenHash, boxTokenHashes)
	if err != nil {
		if token.Refused(err) {
			return box, false, false, err
		}
		return box, false, false, capability.Unavailable(err)
	}
	if e := s.judgeToken(&box, old, from); e != nil {
		return box, old, true, e
	}
	return box, old, true, nil
}

func boxTokenHashes(b store.Box) (string, string) { return b.TokenHash, b.OldTokenHash }

// heldHash is the hash of the token boxOf found box by: its token's, or
// (old) the one's before its last rotation. A request is judged, and what
// is read or written on its behalf gated, by this hash, the token hashed
// once.
func heldHash(box *store.Box, old bool) string {
	if old {
		return box.OldTokenHash
	}
	return box.TokenHash
}

// judgeToken refuses the token of box, sent from from, when box is
// bound to addresses from is outside of, or the token is past its
// lifetime: its expiry, or (old, the token of the box before its last
// rotation) its grace. It returns nil when the token is good.
func (s *Server) judgeToken(box *store.Box, old bool, from netip.Addr) *capability.Error {
	if !box.Admits(from) {
		seen := "an address the broker could not read"
		if from.IsValid() {
			seen = from.String()
		}
		return capability.Refuse(capability.ReasonOutside,
			"The token was used from outside its box's addresses: this request came from %s, and its owner bound the box's token to where the box runs, so it is refused. A token that leaves its box is worth nothing; if the box has moved, its owner binds it anew with `boxbroker box bind <box> --from CIDR`.", seen)
	}
	now := s.cfg.TokenNow()
	if old && !now.Before(box.OldUntil) {
		return graceEnded(box)
	}
	if !old && !box.ExpiresAt.IsZero() && !now.Before(box.ExpiresAt) {
		return tokenExpired(box)
	}
	return nil
}

// tokenExpired is the refusal of box's token once its expiry has come.
func tokenExpired(box *store.Box) *capability.Error {
	return capability.Refuse(capability.ReasonExpired,
		"The box's token expired at %s. Its owner rotates it (`boxbroker box rotate <box>`, or Rotate on the owner's page) and gives the box the new token.", protocol.FormatTime(box.ExpiresAt))
}

// graceEnded is the refusal of box's token before its last rotation once
// the grace its owner gave it has ended.
func graceEnded(box *store.Box) *capability.Error {
	return capability.Refuse(capability.ReasonExpired,
		"The token was replaced when the box's token was rotated, and the grace its owner gave the old one ended at %s; the box uses its new token.", protocol.FormatTime(box.OldUntil))
}

// rejudgeEvery is how often the box of a request whose body is still
// being read, or whose answer is still being written, has its token
// judged again (rejudge).
const rejudgeEvery = time.Second

// judged is what rejudge keeps of the box a request was admitted for.
// The request's body and its answer are judged on different goroutines
// (under httputil.ReverseProxy the transport reads the body as the
// handler writes the answer): mu guards at, refusal and cut.
type judged struct {
	mu sync.Mutex
	// at is when the box was last judged (by the token's clock); refusal,
	// once set, the box's refusal that cut the request, and cut the error
	// every later read of its body and write of its answer returns.
	at      time.Time
	refusal *capability.Error
	cut     error
}

// refused is the refusal that cut the request (rejudge), or nil.
func (j *judged) refused() *capability.Error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.refusal
}

// rejudge applies the rule again, at most once each rejudgeEvery by
// the token's clock, to the box that info's request was admitted for, as
// its body is read and its answer written: an upload that streams on, or
// an answer that does (a host's watch, an event stream), is not judged
// once, at its request. Once the box would be refused (paused, removed,
// its token past a rotation's grace or its expiry, bound elsewhere, its
// report no longer declaring the words), it returns an error, now and
// for every later read or write, and the request's records keep the
// refusal's reason: nothing more of the body reaches the upstream, whose
// request is broken off, nothing more of the answer reaches the box, and
// the capability stops; a box not yet answered is answered with the
// refusal (ServeHTTP). A store that does not answer ends nothing; the box
// is judged again at the next read or write after rejudgeEvery. A
// request admitted for no box (a public route, a refusal) is not judged.
// It may be called from the body's goroutine and the answer's at once.
func (s *Server) rejudge(ctx context.Context, info *requestInfo) error {
	if info.admitted.Token == "" {
		return nil
	}
	j := &info.judged
	now := s.cfg.TokenNow()
	j.mu.Lock()
	if j.cut != nil || now.Sub(j.at) < rejudgeEvery {
		cut := j.cut
		j.mu.Unlock()
		return cut
	}
	j.at = now
	j.mu.Unlock()
	// The store is read with mu free: the other goroutine, meanwhile,
	// finds the box judged just now and goes on.
	adm, err := s.AdmitBox(ctx, info.admitted.Token, info.Capability, info.from)
	if err == nil {
		err = adm.Require(info.admitted.Words)
	}
	if err == nil {
		return nil
	}
	var e *capability.Error
	if token.Refused(err) {
		e = tokenRefused(err)
	} else if !errors.As(err, &e) || e.Status == http.StatusServiceUnavailable {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cut == nil {
		j.refusal = e
		j.cut = capability.CutBy(capability.ReasonOf(e))
	}
	return j.cut
}
