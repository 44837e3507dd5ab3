package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/operator"
)

// The owner's page's grants: each box's page lists its grants with their
// expiry and state, revokes a current one, and issues one. It is built on the page's
// extension point (AddBoxSection, HandleUI), as any later part may be.

// addGrantsPage adds the grants section; its forms are rows of forms.
func (u *Page) addGrantsPage() {
	u.AddBoxSection(BoxSection{Title: "Grants", Render: func(ctx context.Context, box string, form FormContext) (template.HTML, error) {
		grants, err := u.a.Operator().ListGrants(ctx, box)
		if err != nil {
			return "", err
		}
		return u.fragment("grants", struct {
			BoxPath            string
			CSRF               template.HTML
			Grants             []operator.GrantView
			DefaultTTL, MaxTTL string
		}{url.PathEscape(box), form.CSRFField(), grants, shortDuration(grant.DefaultTTL), shortDuration(grant.MaxTTL)})
	}})
}

// until says when the protocol time at comes, from now: "in 14m", or
// "3m ago" once past; "never" for none.
func until(at *string, now time.Time) string {
	if at == nil {
		return "never"
	}
	t, err := time.Parse(time.RFC3339Nano, *at)
	d := t.Sub(now)
	switch {
	case err != nil || d <= 0:
		return ago(*at, now)
	case d < time.Minute:
		return fmt.Sprintf("in %ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("in %dm", int(d.Minutes()))
	}
	return fmt.Sprintf("in %dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// shortDuration writes d as a person would type it: 15m, 24h, 1h30m.
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// grantedPage is the page that shows an issued grant's value, once.
type grantedPage struct {
	chrome
	Box    string
	Issued operator.IssuedGrant
	Lasts  string
}

// issueGrant issues a grant from the box page's form (principal, ttl)
// and answers with the one page that shows its value. The answer is not
// cached (Cache-Control: no-store) and the value is never logged; a
// reload does not show it again, but would post the form again, issuing
// another grant, so the page says to go back to the box instead.
func issueGrant(f *formPost) error {
	issued, err := f.op.IssueGrant(f.ctx(), f.box, operator.NewGrant{Principal: f.get("principal"), TTL: f.get("ttl")})
	if err != nil {
		return err
	}
	ttl, _ := operator.ParseTTL(f.get("ttl")) // IssueGrant took it, so it parses
	f.render(http.StatusOK, "granted", grantedPage{chrome: f.chrome(), Box: f.box, Issued: issued, Lasts: shortDuration(ttl)})
	return nil
}
