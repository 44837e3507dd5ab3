package operator

import (
	"context"
	"fmt"
	"net/http"

	"github.com/intentius/boxbroker/internal/cache"
	"github.com/intentius/boxbroker/internal/pool"
	"github.com/intentius/boxbroker/internal/secrets"
	"github.com/intentius/boxbroker/internal/store"
)

// The operator's Anthropic credential pool: named entries, each a sealed
// credential with a weight and a base URL, and the shared credential as
// its entry pool.Default. Entries are read through the box-facing cache,
// so each write waits until every replica sees it (Changed).

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

// ErrEntryHoldsValue refuses a pool entry whose name or URL holds its
// value: the refusal of a bad URL repeats the URL, and so would repeat
// the value.
var ErrEntryHoldsValue = Errorf(Invalid,
	"The entry's name or URL holds a credential; the credential goes only in the value field. Nothing was set.")

// CheckEntryName refuses a name that is no pool entry's.
func CheckEntryName(name string) error {
	if !pool.ValidName(name) {
		return Errorf(Invalid, "%s.", upperFirst(pool.ErrName.Error()))
	}
	return nil
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
		return "", Errorf(Invalid, "%s.", upperFirst(err.Error()))
	}
	return u, nil
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// NoEntry says the pool has no entry name.
func NoEntry(name string) string {
	return fmt.Sprintf("The credential pool has no entry named %s.", name)
}

// orBroker names an entry's URL, "" being the broker's.
func orBroker(u string) string {
	if u == "" {
		return "the broker's"
	}
	return u
}

// PoolEntries lists the pool's entries (the shared credential as
// pool.Default) with their kinds, and the state and counts of the
// Config's Pool; with no Pool, those of none (every entry healthy, no
// counts), as a command on the store alone knows them. Never a value.
func (s *Service) PoolEntries(ctx context.Context) ([]PoolEntryView, error) {
	p := s.cfg.Pool
	if p == nil {
		if s.cfg.Keyring == nil {
			return nil, fmt.Errorf("list the credential pool: the operator service has no keyring")
		}
		p = pool.New(pool.Config{Cache: cache.New(s.cfg.Store, cache.Options{}), Keyring: s.cfg.Keyring})
	}
	stats, err := p.Stats(ctx)
	return storeViews(stats, err, func(st pool.Stat) PoolEntryView {
		return PoolEntryView{Name: st.Name, Kind: st.Kind, Weight: st.Weight, URL: st.URL, UpdatedAt: formatTime(st.UpdatedAt),
			State: st.State, Until: optionalTime(st.Until), Requests: st.Requests, R429: st.R429, R529: st.R529,
			Failovers: st.Failovers, Failures: st.Failures}
	})
}

// SetPoolEntry checks value as a credential of kind (CheckedValue; "" is
// anthropic), seals it as the pool entry name with weight (0 for 1) and
// base URL ("" for the broker's; none for a cloud account, whose endpoint
// is in its JSON), stores it and waits until every replica sees it;
// value is zeroed. The entry pool.Default is the shared credential, of
// weight 1 and the broker's URL. Invalid for a bad name, kind, weight,
// URL or value, or a name or URL holding the value (ErrEntryHoldsValue).
func (s *Service) SetPoolEntry(ctx context.Context, name, kind string, weight int, baseURL string, value []byte) (PoolEntryView, error) {
	raw := string(value)
	secrets.Zero(value)
	defer func() { raw = "" }()
	if HoldsValue(raw, name, baseURL) {
		return PoolEntryView{}, ErrEntryHoldsValue
	}
	if err := CheckEntryName(name); err != nil {
		return PoolEntryView{}, err
	}
	if err := CheckKind("kind", kind); err != nil {
		return PoolEntryView{}, err
	}
	if IsCloud(kind) && baseURL != "" {
		return PoolEntryView{}, Errorf(Invalid,
			"url is an Anthropic-compatible base URL; a %s account's endpoint goes in its JSON.", kind)
	}
	u, err := CheckEntry(name, weight, baseURL)
	if err != nil {
		return PoolEntryView{}, err
	}
	if weight == 0 {
		weight = 1
	}
	var v PoolEntryView
	if name == pool.Default {
		cv, err := s.StoreCredential(ctx, pool.SharedID, kind, &raw)
		if err != nil {
			return PoolEntryView{}, err
		}
		v = PoolEntryView{Name: name, Kind: cv.Kind, Weight: 1, UpdatedAt: cv.UpdatedAt, State: pool.StateHealthy}
	} else if v, err = s.putPoolEntry(ctx, name, kind, weight, u, &raw); err != nil {
		return PoolEntryView{}, err
	}
	msg := fmt.Sprintf("set credential pool entry %s (%s, weight %d, URL %s)", v.Name, v.Kind, v.Weight, orBroker(v.URL))
	if err := s.done(ctx, "", http.StatusOK, msg, "entry", name); err != nil {
		return PoolEntryView{}, err
	}
	return v, nil
}

// putPoolEntry checks *value as a credential of kind (CheckedValue),
// seals it as the pool entry name, stores it, clears *value, and waits
// until every replica sees it.
func (s *Service) putPoolEntry(ctx context.Context, name, kind string, weight int, u string, value *string) (PoolEntryView, error) {
	sealed, what, err := s.seal(kind, value, "pool entry "+name, pool.AD(name), pool.Kind)
	if err != nil {
		return PoolEntryView{}, err
	}
	e := store.PoolEntry{Name: name, Weight: weight, URL: u, Sealed: sealed, UpdatedAt: s.cfg.Now().UTC()}
	if err := s.cfg.Store.SetPoolEntry(ctx, e); err != nil {
		return PoolEntryView{}, StoreError(err, "", "")
	}
	if err := s.Changed(ctx, store.ChangePool, name); err != nil {
		return PoolEntryView{}, err
	}
	return PoolEntryView{Name: name, Kind: what, Weight: weight, URL: u, UpdatedAt: formatTime(e.UpdatedAt), State: pool.StateHealthy}, nil
}

// ChangePoolEntry changes the weight and base URL of the entry name,
// checked as SetPoolEntry checks them, and keeps its sealed value, which
// it never opens; it waits until every replica sees the change. Invalid
// for pool.Default (the shared credential: weight 1, the broker's URL)
// or a bad weight or URL, NotFound for no such entry.
func (s *Service) ChangePoolEntry(ctx context.Context, name string, weight int, baseURL string) error {
	if err := CheckEntryName(name); err != nil {
		return err
	}
	if name == pool.Default {
		return Errorf(Invalid,
			"The default entry is the shared credential: its weight is 1 and its URL the broker's --anthropic-url. Nothing was changed.")
	}
	u, err := CheckEntry(name, weight, baseURL)
	if err != nil {
		return err
	}
	es, err := s.cfg.Store.PoolEntries(ctx)
	if err != nil {
		return StoreError(err, "", "")
	}
	var e *store.PoolEntry
	for i := range es {
		if es[i].Name == name {
			e = &es[i]
		}
	}
	if e == nil {
		return Errorf(NotFound, "%s", NoEntry(name))
	}
	e.Weight, e.URL, e.UpdatedAt = weight, u, s.cfg.Now().UTC()
	if err := s.cfg.Store.SetPoolEntry(ctx, *e); err != nil {
		return StoreError(err, "", "")
	}
	return s.wrote(ctx, store.ChangePool, name, "", http.StatusOK, fmt.Sprintf("changed credential pool entry %s to weight %d, URL %s", name, weight, orBroker(u)), "entry", name)
}

// RemovePoolEntry removes the pool entry name (pool.Default: the shared
// credential) and waits until every replica sees it gone. NotFound for
// no such entry.
func (s *Service) RemovePoolEntry(ctx context.Context, name string) error {
	if err := CheckEntryName(name); err != nil {
		return err
	}
	var err error
	kind, key := store.ChangePool, name
	if name == pool.Default {
		err = s.cfg.Store.DeleteCredential(ctx, pool.SharedID)
		kind, key = store.ChangeCredential, pool.SharedID
	} else {
		err = s.cfg.Store.DeletePoolEntry(ctx, name)
	}
	if err != nil {
		return StoreError(err, NoEntry(name), "")
	}
	return s.wrote(ctx, kind, key, "", http.StatusNoContent, "removed credential pool entry "+name, "entry", name)
}
