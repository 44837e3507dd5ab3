package ui

import (
	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"

	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/grant"
	"github.com/intentius/boxbroker/internal/protocol"
)

// The owner's page's grants: each box's page lists its grants with their
// expiry and state, revokes a current one, and issues one. It is built on the page's
// extension point (AddBoxSection, HandleUI), as any later part may be.

type grantRow struct {
	ID, Principal, Issued, Expires, State string
	// IssuedAgo and ExpiresIn say the times relative to now.
	IssuedAgo, ExpiresIn string
	// RevokedAgo says when a revoked grant was revoked; "" if it is not.
	RevokedAgo string
}

// addGrantsPage adds the grants section; its forms are rows of forms.
func (u *Page) addGrantsPage() {
	u.AddBoxSection(BoxSection{Title: "Grants", Render: func(ctx context.Context, box string, form FormContext) (template.HTML, error) {
		grants, err := u.cfg.Store.ListGrants(ctx, box)
		if err != nil {
			return "", err
		}
		now := u.cfg.Now()
		data := struct {
			BoxPath            string
			CSRF               template.HTML
			Grants             []grantRow
			DefaultTTL, MaxTTL string
		}{BoxPath: url.PathEscape(box), CSRF: form.CSRFField(), DefaultTTL: shortDuration(grant.DefaultTTL), MaxTTL: shortDuration(grant.MaxTTL)}
		for _, g := range grants {
			revoked := ""
			if !g.RevokedAt.IsZero() {
				revoked = ago(protocol.FormatTime(g.RevokedAt), now)
			}
			data.Grants = append(data.Grants, grantRow{RevokedAgo: revoked, ID: g.ID, Principal: g.Principal,
				Issued: protocol.FormatTime(g.CreatedAt), Expires: protocol.FormatTime(g.ExpiresAt), State: operator.GrantState(g.RevokedAt, g.ExpiresAt, now),
				IssuedAgo: ago(protocol.FormatTime(g.CreatedAt), now), ExpiresIn: until(g.ExpiresAt, now)})
		}
		return u.fragment("grants", data)
	}})
}

// until says when at comes, from now: "in 14m", or "3m ago" once past;
// "never" for the zero time.
func until(at, now time.Time) string {
	d := at.Sub(now)
	switch {
	case at.IsZero():
		return "never"
	case d <= 0:
		return ago(protocol.FormatTime(at), now)
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
	Box     string
	Issued  operator.IssuedGrant
	Lasts   string
	Expires string
}

// issueGrant issues a grant from the box page's form (principal, ttl)
// and answers with the one page that shows its value. The answer is not
// cached (Cache-Control: no-store) and the value is never logged; a
// reload does not show it again, but would post the form again, issuing
// another grant, so the page says to go back to the box instead.
func issueGrant(f *formPost) error {
	name, err := admin.BoxName(f.r)
	if err != nil {
		return err
	}
	ttl, err := operator.ParseTTL(f.get("ttl"))
	if err != nil {
		return err
	}
	issued, err := f.op.IssueGrant(f.ctx(), name, operator.NewGrant{Principal: f.get("principal"), TTL: ttl.String()})
	if err != nil {
		return err
	}
	expires := ""
	if issued.Grant.ExpiresAt != nil {
		expires = *issued.Grant.ExpiresAt
	}
	f.render(http.StatusOK, "granted", grantedPage{chrome: f.chrome(), Box: name, Issued: issued, Lasts: shortDuration(ttl), Expires: expires})
	return nil
}
