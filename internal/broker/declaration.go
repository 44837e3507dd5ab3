package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// declaration answers POST /api/box/declaration.
func (s *Server) declaration(w http.ResponseWriter, r *http.Request, info *requestInfo) error {
	if r.Method != http.MethodPost {
		leaveBody(w, r)
		w.Header().Set("Allow", http.MethodPost)
		return capability.Refuse(capability.ReasonMethod, "The declaration route takes POST.")
	}
	tok, err := token.FromRequest(r)
	var box store.Box
	var old bool
	if err == nil {
		box, old, _, err = s.boxOf(r.Context(), tok, s.Source(r))
	}
	info.Box = box.Name
	if err != nil {
		leaveBody(w, r) // not a byte of it is read for a token refused
		if token.Refused(err) {
			return tokenRefused(err).At(http.StatusUnauthorized)
		}
		return err
	}
	// A report is a request of the box like any other: it is held within
	// the box's rate and in-flight bounds, so that a box cannot make the
	// store write (and every replica drop its cache, and wait out Settle)
	// as often as it can send.
	h, err := s.limits.take(box.Name)
	if err != nil {
		leaveBody(w, r)
		return err
	}
	defer h.release()
	// A report is small: a body still arriving after BodyTimeout is a
	// client holding a connection, not a report.
	_ = http.NewResponseController(w).SetReadDeadline(s.cfg.Now().Add(BodyTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(unwrap(w), r.Body, protocol.DeclarationMaxBytes))
	if err != nil {
		// The rest of a body over the bound, or of one that stalled,
		// is left unread: the refusal goes out at once.
		leaveBody(w, r)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return capability.Refuse(capability.ReasonTooLarge, "The declaration report is over %d bytes.", protocol.DeclarationMaxBytes)
	}
	if err != nil {
		return capability.Refuse(capability.ReasonInvalid, "The declaration report could not be read.")
	}
	d, err := protocol.ParseDeclarationReport(body, s.cfg.Broker)
	var re *protocol.ReportError
	if errors.As(err, &re) {
		info.Reason = capability.ReasonMalformedReport
		return capability.Refuse(capability.ReasonMalformedReport, "%s", re.Message).At(re.Status)
	}
	if err != nil {
		return err
	}
	scrubDeclaration(d)
	d.At = s.cfg.Now().UTC().Truncate(time.Millisecond)
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	kept, err := s.cfg.Store.SaveDeclaration(r.Context(), box.Name, heldHash(&box, old), doc, d.At)
	if err != nil {
		if errors.Is(err, store.ErrGraceEnded) { // admitted within the grace, saved past it
			return graceEnded(&box)
		}
		if errors.Is(err, store.ErrTokenExpired) { // admitted before its expiry, saved past it
			return tokenExpired(&box)
		}
		if errors.Is(err, store.ErrNotFound) { // removed meanwhile, or its token replaced
			return tokenRefused(token.ErrUnknown).At(http.StatusUnauthorized)
		}
		return capability.Unavailable(err)
	}
	// A report racing one taken later is not kept: the answer is what
	// the broker kept, the later one, and when it was taken.
	if !bytes.Equal(kept.Doc, doc) {
		d = &protocol.Declaration{}
		if err := json.Unmarshal(kept.Doc, d); err != nil {
			return fmt.Errorf("declaration of box %s kept: %w", box.Name, err)
		}
		d.At = kept.At
	}
	s.cfg.Cache.Drop(store.ChangeDeclaration, box.Name)
	// The 200 says the report is in force: wait until every replica judges
	// by it, so that the box's next request is judged by it wherever it goes.
	if err := s.cfg.Cache.Settle(r.Context()); err != nil {
		return err
	}
	pay := s.cfg.Payer.ForBox(box)
	writeJSON(w, http.StatusOK, protocol.KeptOf(d, &pay))
	return nil
}

// scrubDeclaration replaces every token, or what is left of one, in the
// strings of a report the broker keeps and shows (its scope words, its
// listing's title and line, its principals), as in every record: a box
// may report anything there. Words that read the same once scrubbed are
// kept once, as the report's own repeated words are: a kept scope
// (declarationKept's) holds no word twice.
func scrubDeclaration(d *protocol.Declaration) {
	for i := range d.Capabilities {
		d.Capabilities[i].Scope = onceEach(proxy.ScrubKeptAll(d.Capabilities[i].Scope))
	}
	if l := d.Listing; l != nil {
		l.Title, l.Line = proxy.ScrubKept(l.Title), proxy.ScrubKept(l.Line)
	}
	if sp := d.Spend; sp != nil {
		for i := range sp.ByPrincipal {
			if p := sp.ByPrincipal[i].Principal; p != nil {
				kept := proxy.ScrubKept(*p)
				sp.ByPrincipal[i].Principal = &kept
			}
		}
	}
}

// onceEach returns words with each word's repeats after its first
// removed, in place (a list with none is returned as it is).
func onceEach(words []string) []string {
	out := words[:0]
	for _, w := range words {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// writeJSON answers w with status and v in JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		capability.Refuse(capability.ReasonInternal, "The broker could not encode its answer.").Write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
