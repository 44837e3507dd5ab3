package admin

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

func (s *Server) setCredential(r *http.Request, cv CredentialValue) (operator.CredentialView, error) {
	return s.Op(r).SetCredential(r.Context(), r.PathValue("id"), cv.Kind, []byte(cv.Value))
}

func (s *Server) setSecret(r *http.Request, sv operator.SecretValue) (operator.SecretView, error) {
	return s.Op(r).SetSecret(r.Context(), r.PathValue("name"), r.PathValue("secret"), sv)
}

func (s *Server) setVisitor(r *http.Request, cv CredentialValue) (operator.VisitorView, error) {
	return s.Op(r).SetVisitor(r.Context(), r.PathValue("principal"), cv.Kind, []byte(cv.Value))
}

func (s *Server) setSecretRules(r *http.Request, sr SecretRules) (operator.SecretView, error) {
	return s.Op(r).SetSecretRules(r.Context(), r.PathValue("name"), r.PathValue("secret"), sr.Rules, sr.Rate)
}

func (s *Server) removeSecret(r *http.Request) error {
	return s.Op(r).RemoveSecret(r.Context(), r.PathValue("name"), r.PathValue("secret"))
}

// limit reads the ?limit= query value: def when absent, and at most max.
func limit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, operator.Errorf(operator.Invalid, "limit is a whole number from 1 to %d.", max)
	}
	return n, nil
}

// FeedbackPageBytes bounds the bodies one answer of GET
// /api/boxes/{name}/feedback holds: a page ends at the batch that
// brings them to it or past it, and its next says where the rest starts.
const FeedbackPageBytes = 16 << 20

// listFeedback answers GET /api/boxes/{name}/feedback: how many batches
// the box keeps, and a page of them, newest first — limit (default 50,
// at most store.MaxFeedbackPage) from after (the answer before's next),
// read a page at a time from the store.
func (s *Server) listFeedback(r *http.Request) (FeedbackList, error) {
	b, err := s.Box(r)
	if err != nil {
		return FeedbackList{}, err
	}
	n, err := limit(r, 50, store.MaxFeedbackPage)
	if err != nil {
		return FeedbackList{}, err
	}
	var after int64
	if v := r.URL.Query().Get("after"); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 1 {
			return FeedbackList{}, operator.Errorf(operator.Invalid, "after is the next of the answer before.")
		}
	}
	kept, err := s.cfg.Store.CountFeedback(r.Context(), b.Name)
	if err != nil {
		return FeedbackList{}, operator.StoreError(err, "", "")
	}
	batches, more, err := s.cfg.Store.ListFeedback(r.Context(), store.FeedbackQuery{Box: b.Name, After: after, Limit: n, NewestFirst: true, MaxBytes: FeedbackPageBytes})
	if err != nil {
		return FeedbackList{}, operator.StoreError(err, "", "")
	}
	out := FeedbackList{Count: kept.Batches, Batches: make([]FeedbackView, 0, len(batches))}
	for _, f := range batches {
		body := json.RawMessage(f.Body)
		if !json.Valid(body) {
			body, _ = json.Marshal(string(f.Body))
		}
		words := f.Words
		if words == nil {
			words = []string{}
		}
		out.Batches = append(out.Batches, FeedbackView{ID: f.ID, At: protocol.FormatTime(f.At), Words: words, Body: body})
	}
	if more {
		out.Next = strconv.FormatInt(batches[len(batches)-1].ID, 10)
	}
	return out, nil
}

func (s *Server) removeResource(r *http.Request) error {
	return s.Op(r).RemoveResource(r.Context(), r.PathValue("name"), r.PathValue("kind"), r.PathValue("id"))
}
