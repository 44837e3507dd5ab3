package admin

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
)

func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request) error {
	creds, err := s.op.ListCredentials(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, CredentialList{Credentials: creds})
}

func (s *Server) setCredential(w http.ResponseWriter, r *http.Request) error {
	var cv CredentialValue
	if err := readJSON(w, r, &cv); err != nil {
		return err
	}
	v, err := s.Op(r, 0).SetCredential(r.Context(), r.PathValue("id"), cv.Kind, []byte(cv.Value))
	cv.Value = ""
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removeCredential(w http.ResponseWriter, r *http.Request) error {
	if err := s.Op(r, 0).RemoveCredential(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

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
	return writeJSON(w, http.StatusOK, operator.SecretList{Secrets: views})
}

func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) error {
	var sv operator.SecretValue
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
	return writeJSON(w, http.StatusOK, operator.ResourceList{Resources: list})
}

func (s *Server) addResource(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.Box(r); err != nil {
		return err
	}
	var nr operator.NewResource
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
