package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// PoolEntryView is one entry of the operator's credential pool: never its
// value. State and the counts are the answering replica's own: State is
// healthy, cooling or failed (until Until), and the counts run from
// when that replica started.
type PoolEntryView struct {
	Name      string  `json:"name"`
	Kind      string  `json:"kind"`
	Weight    int     `json:"weight"`
	URL       string  `json:"url"`
	UpdatedAt string  `json:"updatedAt"`
	State     string  `json:"state"`
	Until     *string `json:"until"`
	Requests  int64   `json:"requests"`
	R429      int64   `json:"r429"`
	R529      int64   `json:"r529"`
	Failovers int64   `json:"failovers"`
	Failures  int64   `json:"failures"`
}

// PoolList is the answer to GET /api/credentials/pool.
type PoolList struct {
	Entries []PoolEntryView `json:"entries"`
}

// PoolEntryValue is the body of PUT /api/credentials/pool/{entry}: the
// value, its weight (0 for 1), its base URL ("" for the broker's) and its
// kind, as CredentialValue's (a cloud account takes no URL: its endpoint
// is in its JSON).
type PoolEntryValue struct {
	Value  string `json:"value"`
	Weight int    `json:"weight,omitempty"`
	URL    string `json:"url,omitempty"`
	Kind   string `json:"kind,omitempty"`
}

// poolRoutes are the pool's routes, added to apiRoutes.
func (s *Server) poolRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/credentials/pool", Handle: s.listPool},
		{Pattern: "PUT /api/credentials/pool/{entry}", Handle: s.setPoolEntry},
		{Pattern: "DELETE /api/credentials/pool/{entry}", Handle: s.removePoolEntry},
	}
}

// EntryName reads and checks the {entry} path value.
func EntryName(r *http.Request) (string, error) {
	name := r.PathValue("entry")
	if !pool.ValidName(name) {
		return "", operator.Errorf(operator.Invalid, "%s.", upperFirst(pool.ErrName.Error()))
	}
	return name, nil
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// Pool is the operator's credential pool: Config.Pool, or one over the
// cache and keyring when none was given.
func (s *Server) Pool() *pool.Pool {
	if s.cfg.Pool != nil {
		return s.cfg.Pool
	}
	return pool.New(pool.Config{Cache: s.cfg.Cache, Keyring: s.cfg.Keyring})
}

func (s *Server) listPool(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Cache == nil {
		return operator.Errorf(operator.NotImplemented, "This admin API reads no pool.")
	}
	stats, err := s.Pool().Stats(r.Context())
	if err != nil {
		return operator.StoreError(err, "", "")
	}
	out := PoolList{Entries: make([]PoolEntryView, 0, len(stats))}
	for _, st := range stats {
		v := PoolEntryView{Name: st.Name, Kind: st.Kind, Weight: st.Weight, URL: st.URL, UpdatedAt: formatTime(st.UpdatedAt),
			State: st.State, Requests: st.Requests, R429: st.R429, R529: st.R529, Failovers: st.Failovers, Failures: st.Failures}
		if !st.Until.IsZero() {
			u := formatTime(st.Until)
			v.Until = &u
		}
		out.Entries = append(out.Entries, v)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) setPoolEntry(w http.ResponseWriter, r *http.Request) error {
	name, err := EntryName(r)
	if err != nil {
		return err
	}
	var pv PoolEntryValue
	if err := readJSON(w, r, &pv); err != nil {
		return err
	}
	defer func() { pv.Value = "" }()
	if err := checkKind("kind", pv.Kind); err != nil {
		return err
	}
	if isCloud(pv.Kind) && pv.URL != "" {
		return operator.Errorf(operator.Invalid,
			"url is an Anthropic-compatible base URL; a %s account's endpoint goes in its JSON.", pv.Kind)
	}
	u, err := CheckEntry(name, pv.Weight, pv.URL)
	if err != nil {
		return err
	}
	v, err := s.SetPoolEntryOf(r.Context(), name, pv.Kind, pv.Weight, u, &pv.Value)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

// CheckEntry checks an entry's name, weight (0 for 1) and base URL with
// pool.CheckEntry, as the CLI does, and returns the URL's canonical form.
// Its refusal repeats a bad URL.
func CheckEntry(name string, weight int, rawURL string) (string, error) {
	if weight == 0 {
		weight = 1
	}
	u, err := pool.CheckEntry(name, weight, rawURL)
	if err != nil {
		return "", operator.Errorf(operator.Invalid, "%s.", upperFirst(err.Error()))
	}
	return u, nil
}

// SetPoolEntry stores the pool entry name, checked by CheckEntry, with *value
// (then cleared), an Anthropic key or setup token: the Default entry as
// the shared credential, any other as a named entry.
func (s *Server) SetPoolEntry(ctx context.Context, name string, weight int, u string, value *string) (PoolEntryView, error) {
	return s.SetPoolEntryOf(ctx, name, cloud.KindAnthropic, weight, u, value)
}

// SetPoolEntryOf is SetPoolEntry with a credential of kind (one of
// cloud.Kinds; "" for anthropic), checked by CheckCredential: for a
// cloud account, *value is its JSON and u is "".
func (s *Server) SetPoolEntryOf(ctx context.Context, name, kind string, weight int, u string, value *string) (PoolEntryView, error) {
	if weight == 0 {
		weight = 1
	}
	if name == pool.Default {
		cv, err := s.op.StoreCredential(ctx, pool.SharedID, kind, value)
		if err != nil {
			return PoolEntryView{}, err
		}
		return PoolEntryView{Name: name, Kind: cv.Kind, Weight: 1, UpdatedAt: cv.UpdatedAt, State: pool.StateHealthy}, nil
	}
	return s.putPoolEntry(ctx, name, kind, weight, u, value)
}

// putPoolEntry checks *value as a credential of kind (checkedValue),
// seals it as the pool entry name, stores it, clears *value, and waits
// until every replica sees it.
func (s *Server) putPoolEntry(ctx context.Context, name, credKind string, weight int, u string, value *string) (PoolEntryView, error) {
	plain, err := checkedValue("kind", credKind, value)
	if err != nil {
		return PoolEntryView{}, err
	}
	sealed, err := s.cfg.Keyring.Seal(plain, pool.AD(name))
	kind := pool.Kind(plain)
	secrets.Zero(plain)
	if err != nil {
		return PoolEntryView{}, fmt.Errorf("seal pool entry %s: %w", name, err)
	}
	e := store.PoolEntry{Name: name, Weight: weight, URL: u, Sealed: sealed, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetPoolEntry(ctx, e); err != nil {
		return PoolEntryView{}, operator.StoreError(err, "", "")
	}
	if err := s.Changed(ctx, store.ChangePool, name); err != nil {
		return PoolEntryView{}, err
	}
	s.log.Info("admin: credential pool entry set", "entry", name, "kind", kind, "weight", weight)
	return PoolEntryView{Name: name, Kind: kind, Weight: weight, URL: u, UpdatedAt: formatTime(e.UpdatedAt), State: pool.StateHealthy}, nil
}

func (s *Server) removePoolEntry(w http.ResponseWriter, r *http.Request) error {
	name, err := EntryName(r)
	if err != nil {
		return err
	}
	if err := s.DeletePoolEntry(r.Context(), name); err != nil {
		return err
	}
	s.log.Info("admin: credential pool entry removed", "entry", name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// DeletePoolEntry removes the pool entry name (the Default entry is the shared
// credential) and waits until every replica sees it gone.
func (s *Server) DeletePoolEntry(ctx context.Context, name string) error {
	var err error
	kind, key := store.ChangePool, name
	if name == pool.Default {
		err = s.cfg.Store.DeleteCredential(ctx, pool.SharedID)
		kind, key = store.ChangeCredential, pool.SharedID
	} else {
		err = s.cfg.Store.DeletePoolEntry(ctx, name)
	}
	if err != nil {
		return operator.StoreError(err, fmt.Sprintf("The credential pool has no entry named %s.", name), "")
	}
	return s.Changed(ctx, kind, key)
}
