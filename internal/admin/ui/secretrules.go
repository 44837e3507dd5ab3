package ui

import (
	"fmt"
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
func setSecretRules(f *formPost) error {
	u, ctx, box := f.u, f.ctx(), f.box
	name, err := admin.SecretName(f.r)
	if err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(f.raw("rules"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	rules, rate, err := protocol.CheckSecretRules(lines, f.get("rate"))
	if err != nil {
		return operator.Errorf(operator.Invalid, "Rules or rate: %s.", err)
	}
	sec, err := u.cfg.Store.Secret(ctx, box, name)
	if err != nil {
		return operator.StoreError(err, fmt.Sprintf("Box %s has no secret named %s.", box, name), "")
	}
	sec.Rules, sec.Rate, sec.UpdatedAt = rules, rate, u.cfg.Now().UTC()
	if err := u.cfg.Store.SetSecret(ctx, sec); err != nil {
		return operator.StoreError(err, operator.NoBox(box), "")
	}
	if err := u.a.Changed(ctx, store.ChangeSecret, box+"/"+name); err != nil {
		return err
	}
	if err := f.op.Audit(ctx, box, 0, operator.RulesMessage(name, rules, rate)); err != nil {
		return err
	}
	u.log.Info("owner's page: secret rules set", "box", box, "secret", name, "rules", rules, "rate", rate, "admin_token", f.sess.TokenID)
	return nil
}
