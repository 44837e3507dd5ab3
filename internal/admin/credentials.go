package admin

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/pool"
)

// poolRoutes are the pool's routes, added to apiRoutes.
func (s *Server) poolRoutes() []Route {
	return []Route{
		{Pattern: "GET /api/credentials/pool", Handle: answer(http.StatusOK, s.listPool)},
		{Pattern: "PUT /api/credentials/pool/{entry}", Handle: decode(http.StatusOK, entryNamed, s.setPoolEntry)},
		{Pattern: "DELETE /api/credentials/pool/{entry}", Handle: s.removeBy("entry", (*operator.Service).RemovePoolEntry)},
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

// entryNamed refuses r unless its {entry} is an entry name (EntryName),
// as a check for decode.
func entryNamed(r *http.Request) error {
	_, err := EntryName(r)
	return err
}

func (s *Server) listPool(r *http.Request) (operator.PoolList, error) {
	if s.cfg.Cache == nil {
		return operator.PoolList{}, operator.Errorf(operator.NotImplemented, "This admin API reads no pool.")
	}
	entries, err := s.op.PoolEntries(r.Context())
	return operator.PoolList{Entries: entries}, err
}

func (s *Server) setPoolEntry(r *http.Request, pv operator.PoolEntryValue) (operator.PoolEntryView, error) {
	return s.Op(r).SetPoolEntry(r.Context(), r.PathValue("entry"), pv.Kind, pv.Weight, pv.URL, []byte(pv.Value))
}
