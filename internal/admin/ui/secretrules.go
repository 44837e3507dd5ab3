package ui

import "strings"

// setSecretRules sets a held secret's rules (the form's "rules", one
// "METHOD PATTERN" a line; none for any method and path) and rate (its
// "rate", N/PERIOD or empty), checked as the CLI and the admin API check
// them, keeping its value, host, kind and body fields, through the
// operator service.
func setSecretRules(f *formPost) error {
	name := f.r.PathValue("secret") // the service checks it
	var lines []string
	for _, l := range strings.Split(f.raw("rules"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if _, err := f.op.SetSecretRules(f.ctx(), f.box, name, lines, f.get("rate")); err != nil {
		return err
	}
	f.u.log.Info("owner's page: secret rules set", "box", f.box, "secret", name, "admin_token", f.sess.TokenID)
	return nil
}
