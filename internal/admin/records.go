package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/payer"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// MaxValue bounds a credential's or a secret's value, in bytes.
const MaxValue = operator.MaxValue

// CheckValue refuses a value that is empty, too long, or holds a byte
// that cannot go in a header (operator.CheckValue).
var CheckValue = operator.CheckValue

// credentialID checks the {id} path value: anthropic, fountain,
// owner:<box> or visitor:<principal>.
func (s *Server) credentialID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	switch {
	case id == payer.SharedAnthropic || id == payer.SharedFountain:
		return id, nil
	case strings.HasPrefix(id, "owner:") && protocol.IsBoxName(strings.TrimPrefix(id, "owner:")):
		return id, nil
	case strings.HasPrefix(id, "visitor:") && protocol.IsPrincipal(strings.TrimPrefix(id, "visitor:")):
		return id, nil
	}
	return "", operator.Errorf(operator.Invalid,
		"A credential ID is anthropic, fountain, owner:<box> or visitor:<principal>.")
}

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request) error {
	creds, err := s.cfg.Store.ListCredentials(r.Context())
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := CredentialList{Credentials: []CredentialView{}}
	for _, c := range creds {
		kind, err := s.storedKind(r.Context(), c.ID)
		if err != nil {
			return err
		}
		out.Credentials = append(out.Credentials, CredentialView{ID: c.ID, Kind: kind, UpdatedAt: formatTime(c.UpdatedAt)})
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setCredential(w http.ResponseWriter, r *http.Request) error {
	id, err := s.credentialID(r)
	if err != nil {
		return err
	}
	var cv CredentialValue
	if err := readJSON(w, r, &cv); err != nil {
		return err
	}
	defer func() { cv.Value = "" }()
	if err := checkKind("kind", cv.Kind); err != nil {
		return err
	}
	if id == payer.SharedFountain && isCloud(cv.Kind) {
		return operator.Errorf(operator.Invalid,
			"kind is for an Anthropic credential; the fountain key is a bearer key, with no kind.")
	}
	if box, ok := strings.CutPrefix(id, "owner:"); ok {
		if _, err := s.cfg.Store.Box(r.Context(), box); err != nil {
			return operator.StoreError(err, fmt.Sprintf("There is no box named %s to hold an owner's credential.", box), "")
		}
	}
	v, err := s.putCredential(r.Context(), id, cv.Kind, &cv.Value)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// putCredential checks *value as a credential of kind (checkedValue),
// seals it as the credential id, stores it, clears *value, and returns
// how the API shows it. It waits until the credential is in force on
// every replica.
func (s *Server) putCredential(ctx context.Context, id, kind string, value *string) (CredentialView, error) {
	plain, err := checkedValue("kind", kind, value)
	if err != nil {
		return CredentialView{}, err
	}
	sealed, err := s.cfg.Keyring.Seal(plain, payer.AD(id))
	what := CredentialKind(id, plain)
	secrets.Zero(plain)
	if err != nil {
		return CredentialView{}, fmt.Errorf("seal credential %s: %w", id, err)
	}
	c := store.Credential{ID: id, Sealed: sealed, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetCredential(ctx, c); err != nil {
		return CredentialView{}, operator.StoreError(err, "", "")
	}
	if strings.HasPrefix(id, payer.VisitorPrefix) {
		s.Drop(store.ChangeCredential, id) // read from the store at each grant
	} else if err := s.Changed(ctx, store.ChangeCredential, id); err != nil {
		return CredentialView{}, err
	}
	s.log.Info("admin: credential set", "credential", id, "kind", what)
	return CredentialView{ID: id, Kind: what, UpdatedAt: formatTime(c.UpdatedAt)}, nil
}

func (s *Server) removeCredential(w http.ResponseWriter, r *http.Request) error {
	id, err := s.credentialID(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeleteCredential(r.Context(), id); err != nil {
		return operator.StoreError(err, fmt.Sprintf("No %s credential is set.", id), "")
	}
	if err := s.Changed(r.Context(), store.ChangeCredential, id); err != nil {
		return err
	}
	s.log.Info("admin: credential removed", "credential", id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// MinSecretLen is the shortest secret value taken (operator.MinSecretLen).
const MinSecretLen = operator.MinSecretLen

// SecretHost checks an egress secret's host (operator.SecretHost).
var SecretHost = operator.SecretHost

// SecretName checks the {secret} path value.
func SecretName(r *http.Request) (string, error) {
	name := r.PathValue("secret")
	if !protocol.IsSecretName(name) {
		return "", operator.Errorf(operator.Invalid, "A secret name matches ^[A-Z][A-Z0-9_]{0,39}$.")
	}
	return name, nil
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	views, err := s.op.ListSecrets(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, SecretList{Secrets: views})
}

func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) error {
	var sv SecretValue
	if err := readJSON(w, r, &sv); err != nil {
		return err
	}
	v, err := s.Op(r, 0).SetSecret(r.Context(), r.PathValue("name"), r.PathValue("secret"), sv)
	sv.Value = ""
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeSecret(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveSecret(r.Context(), r.PathValue("name"), r.PathValue("secret")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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

func (s *Server) listFeedback(w http.ResponseWriter, r *http.Request) error {
	b, err := s.Box(r)
	if err != nil {
		return err
	}
	n, err := limit(r, 50, 1000)
	if err != nil {
		return err
	}
	batches, err := s.cfg.Store.ListFeedback(r.Context(), b.Name)
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := FeedbackList{Count: len(batches), Batches: []FeedbackView{}}
	for i := len(batches) - 1; i >= 0 && len(out.Batches) < n; i-- {
		f := batches[i]
		body := json.RawMessage(f.Body)
		if !json.Valid(body) {
			body, _ = json.Marshal(string(f.Body))
		}
		words := f.Words
		if words == nil {
			words = []string{}
		}
		out.Batches = append(out.Batches, FeedbackView{ID: f.ID, At: formatTime(f.At), Words: words, Body: body})
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) listResources(w http.ResponseWriter, r *http.Request) error {
	list, err := s.op.ListResources(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ResourceList{Resources: list})
}

func (s *Server) addResource(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.Box(r); err != nil {
		return err
	}
	var nr NewResource
	if err := readJSON(w, r, &nr); err != nil {
		return err
	}
	v, err := s.Op(r, 0).AddResource(r.Context(), r.PathValue("name"), nr)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, v)
}

func (s *Server) removeResource(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveResource(r.Context(), r.PathValue("name"), r.PathValue("kind"), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
