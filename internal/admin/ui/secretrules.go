package ui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// setSecretRules sets a held secret's rules (the form's "rules", one
// "METHOD PATTERN" a line; none for any method and path) and rate (its
// "rate", N/PERIOD or empty), checked as the CLI and the admin API check
// them, keeping its value, host, kind and body fields.
func (u *Page) setSecretRules(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	name, err := admin.SecretName(r)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(r.PostForm.Get("rules"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	rules, rate, err := protocol.CheckSecretRules(lines, strings.TrimSpace(r.PostForm.Get("rate")))
	if err != nil {
		return operator.Errorf(operator.Invalid, "Rules or rate: %s.", err)
	}
	sec, err := u.cfg.Store.Secret(r.Context(), b.Name, name)
	if err != nil {
		return operator.StoreError(err, fmt.Sprintf("Box %s has no secret named %s.", b.Name, name), "")
	}
	sec.Rules, sec.Rate, sec.UpdatedAt = rules, rate, u.cfg.Now().UTC()
	if err := u.cfg.Store.SetSecret(r.Context(), sec); err != nil {
		return operator.StoreError(err, operator.NoBox(b.Name), "")
	}
	if err := u.a.Changed(r.Context(), store.ChangeSecret, b.Name+"/"+name); err != nil {
		return err
	}
	if err := u.op(r).Audit(r.Context(), b.Name, 0, operator.RulesMessage(name, rules, rate)); err != nil {
		return err
	}
	u.log.Info("owner's page: secret rules set", "box", b.Name, "secret", name, "rules", rules, "rate", rate, "admin_token", sess.TokenID)
	back(w, r, b.Name, "rules")
	return nil
}
