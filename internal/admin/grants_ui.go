package admin

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// The owner's page's grants: each box's page lists its grants with their
// expiry and state and revokes a current one. It is built on the page's
// extension point (AddBoxSection, HandleUI), as any later part may be.

var grantsSection = template.Must(template.New("grants").Parse(`{{if .Grants}}<table class="grants"><thead><tr><th>Grant</th><th>Principal</th><th>Issued</th><th>Expires</th><th>State</th><th></th></tr></thead><tbody>
{{range .Grants}}<tr id="grant-{{.ID}}"><td><code>{{.ID}}</code></td><td>{{.Principal}}</td><td>{{.Issued}}</td><td>{{.Expires}}</td><td>{{.State}}</td>
<td>{{if eq .State "current"}}<form method="post" action="/ui/boxes/{{$.BoxPath}}/grants/{{.ID}}/revoke" class="inline">{{$.CSRF}}<button type="submit">Revoke</button></form>{{end}}</td></tr>
{{end}}</tbody></table>{{else}}<p class="dim">None issued. <code>boxbroker grant issue</code> issues one.</p>{{end}}`))

type grantRow struct {
	ID, Principal, Issued, Expires, State string
}

// grantState says whether g stands at now.
func grantState(revoked, expires, now time.Time) string {
	switch {
	case !revoked.IsZero():
		return "revoked"
	case !expires.IsZero() && !now.Before(expires):
		return "expired"
	}
	return "current"
}

// addGrantsPage adds the grants section and its revoke route.
func (s *Server) addGrantsPage() {
	s.AddBoxSection(BoxSection{Title: "Grants", Render: func(ctx context.Context, box string, form FormContext) (template.HTML, error) {
		grants, err := s.cfg.Store.ListGrants(ctx, box)
		if err != nil {
			return "", err
		}
		now := s.cfg.Now()
		data := struct {
			BoxPath string
			CSRF    template.HTML
			Grants  []grantRow
		}{BoxPath: url.PathEscape(box), CSRF: form.CSRFField()}
		for _, g := range grants {
			data.Grants = append(data.Grants, grantRow{ID: g.ID, Principal: g.Principal,
				Issued: formatTime(g.CreatedAt), Expires: formatTime(g.ExpiresAt), State: grantState(g.RevokedAt, g.ExpiresAt, now)})
		}
		var b strings.Builder
		if err := grantsSection.Execute(&b, data); err != nil {
			return "", err
		}
		return template.HTML(b.String()), nil
	}})
	s.HandleUI("POST /ui/boxes/{name}/grants/{id}/revoke", func(w http.ResponseWriter, r *http.Request, sess *Session) error {
		name, err := boxName(r)
		if err != nil {
			return err
		}
		id := r.PathValue("id")
		grants, err := s.cfg.Store.ListGrants(r.Context(), name)
		if err != nil {
			return storeError(err, "", "")
		}
		found := false
		for _, g := range grants {
			found = found || g.ID == id
		}
		if !found {
			return capability.Errorf(http.StatusNotFound, protocol.TypeNotFound, "Box %s has no grant %s.", name, id)
		}
		if err := s.cfg.Store.RevokeGrant(r.Context(), id, s.cfg.Now().UTC()); err != nil {
			return storeError(err, fmt.Sprintf("Box %s has no grant %s.", name, id), "")
		}
		s.log.Info("owner's page: grant revoked", "box", name, "grant", id, "admin_token", sess.TokenID)
		http.Redirect(w, r, "/ui/boxes/"+url.PathEscape(name), http.StatusSeeOther)
		return nil
	})
}
