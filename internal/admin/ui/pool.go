package ui

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/pool"
)

// The owner's page's Credentials page: the operator's Anthropic credential
// pool, each entry with its kind, weight, URL, and this replica's state and
// counts (what GET /api/credentials/pool serves), never a value. Its forms
// add (or replace) an entry, change an entry's weight and URL, and remove
// an entry after a confirmation page. They run behind the session and CSRF
// checks (HandleUI), check and store entries through the operator service
// (SetPoolEntry, ChangePoolEntry, RemovePoolEntry, with pool.CheckEntry as
// the CLI uses it), which records them in the audit log with the admin as the actor
// and no box; no page and no refusal repeats a value, nor a refused URL,
// which could hold one.

// poolRow is one entry as the Credentials page shows it: never its value.
type poolRow struct {
	operator.PoolEntryView
	Until   string // when cooling or failed ends, "" when healthy
	In      string // how long until then
	Default bool   // the shared credential: weight 1, the broker's URL
}

// poolPageData is the Credentials page's content.
type poolPageData struct {
	chrome
	Entries []poolRow
	Max     int
}

func (u *Page) poolPage(w http.ResponseWriter, r *http.Request, sess *Session) error {
	if u.cfg.Cache == nil {
		return operator.Errorf(operator.NotImplemented, "This admin server reads no pool.")
	}
	entries, err := u.a.Operator().PoolEntries(r.Context())
	if err != nil {
		return err
	}
	now := u.cfg.Now()
	d := poolPageData{chrome: u.chrome(r, sess), Max: pool.MaxWeight}
	for _, e := range entries {
		row := poolRow{PoolEntryView: e, Default: e.Name == pool.Default}
		if e.Until != nil {
			until, _ := time.Parse(time.RFC3339, *e.Until)
			row.Until = until.UTC().Format("2006-01-02 15:04:05 UTC")
			row.In = until.Sub(now).Round(time.Second).String()
		}
		d.Entries = append(d.Entries, row)
	}
	u.render(w, http.StatusOK, "credentials", d)
	return nil
}

// errEntryURL refuses a URL the pool does not take, without repeating it:
// one typed into the wrong field could be a key.
var errEntryURL = operator.Errorf(operator.Invalid,
	"The entry's URL is refused: it is an Anthropic-compatible base URL, such as https://api.anthropic.com — http(s), a host, an optional port and path, and no user, password, query or fragment; leave it empty for the broker's --anthropic-url. The page does not repeat it, as it could hold a key.")

// entryFields reads and checks an entry form's weight and URL for the
// entry name, as checkEntry (pool.CheckEntry) checks them, and returns the
// weight and the URL's canonical form. No refusal repeats the URL.
func entryFields(f *formPost, name string) (int, string, error) {
	weight := 1
	if w := f.get("weight"); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			n = -1 // refused below, with pool.ErrWeight's words (0 too, which the API reads as 1)
		}
		weight = n
	}
	rawURL := f.get("url")
	if strings.Contains(rawURL, "sk-ant-") {
		return 0, "", operator.ErrEntryHoldsValue
	}
	// The name and weight first, with the URL left out: their refusals
	// name no input.
	if _, err := operator.CheckEntry(name, weight, ""); err != nil || rawURL == "" {
		return weight, "", err
	}
	u, err := operator.CheckEntry(name, weight, rawURL)
	if err != nil {
		if name == pool.Default {
			return 0, "", err // the Default entry's own refusal, which repeats nothing
		}
		return 0, "", errEntryURL
	}
	return weight, u, nil
}

// addEntry seals and sets a pool entry from the page's form: the admin
// API's PUT /api/credentials/pool/{entry}.
func addEntry(f *formPost) error {
	value := f.raw("value")
	name := f.get("name")
	if operator.HoldsValue(value, name, f.raw("url")) {
		return operator.ErrEntryHoldsValue
	}
	if strings.Contains(name, "sk-ant-") {
		return operator.ErrEntryHoldsValue
	}
	weight, base, err := entryFields(f, name)
	if err != nil {
		return err
	}
	v, err := f.op.SetPoolEntry(f.ctx(), name, "", weight, base, []byte(value))
	if err != nil {
		return err
	}
	f.u.log.Info("owner's page: credential pool entry set", "entry", v.Name, "kind", v.Kind, "weight", v.Weight, "admin_token", f.sess.TokenID)
	return nil
}

// editEntry changes an entry's weight and URL and keeps its sealed value,
// which it never opens.
func editEntry(f *formPost) error {
	name, err := admin.EntryName(f.r)
	if err != nil {
		return err
	}
	weight, base, err := entryFields(f, name)
	if err != nil {
		return err
	}
	if err := f.op.ChangePoolEntry(f.ctx(), name, weight, base); err != nil {
		return err
	}
	f.u.log.Info("owner's page: credential pool entry changed", "entry", name, "weight", weight, "admin_token", f.sess.TokenID)
	return nil
}

func (u *Page) removeEntryForm(w http.ResponseWriter, r *http.Request, sess *Session) error {
	name, err := admin.EntryName(r)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, "credential-remove", formPage{chrome: u.chrome(r, sess), Entry: name, Default: name == pool.Default})
	return nil
}

// removeEntry removes an entry once its name is typed again on the
// confirmation page: the admin API's DELETE /api/credentials/pool/{entry}.
func removeEntry(f *formPost) error {
	name, err := admin.EntryName(f.r)
	if err != nil {
		return err
	}
	if !f.confirmed(name, "credential-remove", formPage{Entry: name, Default: name == pool.Default, Error: "Type the entry's name exactly to remove it; nothing was removed."}) {
		return nil
	}
	if err := f.op.RemovePoolEntry(f.ctx(), name); err != nil {
		return err
	}
	f.u.log.Info("owner's page: credential pool entry removed", "entry", name, "admin_token", f.sess.TokenID)
	return nil
}
