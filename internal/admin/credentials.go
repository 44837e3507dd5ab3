package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/pool"
)

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
	return name, operator.CheckEntryName(name)
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
	entries, err := s.op.PoolEntries(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, operator.PoolList{Entries: entries})
}

func (s *Server) setPoolEntry(w http.ResponseWriter, r *http.Request) error {
	name, err := EntryName(r)
	if err != nil {
		return err
	}
	var pv operator.PoolEntryValue
	if err := readJSON(w, r, &pv); err != nil {
		return err
	}
	value := []byte(pv.Value)
	pv.Value = ""
	v, err := s.Op(r, 0).SetPoolEntry(r.Context(), name, pv.Kind, pv.Weight, pv.URL, value)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v)
}

func (s *Server) removePoolEntry(w http.ResponseWriter, r *http.Request) error {
	name, err := EntryName(r)
	if err != nil {
		return err
	}
	if err := s.Op(r, 0).RemovePoolEntry(r.Context(), name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
