package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
)

// The owner's page's forms, one row each: the route a form posts to, the
// fields it reads, the one call it makes (an operator.Service method,
// but for signing out and a secret's rules), and where the browser goes
// after, with the notice shown there. Every row is served through
// HandleUI, so every post is checked for a session, the session's CSRF
// secret, this origin and, but for signing out, a role that may act,
// before its action runs. The operator service records each of its
// calls in the audit log, with the admin as the actor and the page's
// route (Page.op), never a token or a value.

// form is one form of the page.
type form struct {
	// pattern is its route, "POST /ui/...".
	pattern string
	// fields are the fields it reads besides csrf; its action sees no
	// other.
	fields []string
	// box: the route's {name} must name a box (admin.Server.Box) before
	// a field is read.
	box bool
	// proposals: the route is served only when proposals are configured.
	proposals bool
	// act checks the fields and makes the form's call. It answers itself
	// (formPost.render) or leaves the answer to back.
	act func(f *formPost) error
	// back is where the browser goes after the call, "{name}" standing
	// for the route's {name}; with done, as ?done=done.
	back string
	// done names the notice the page at back shows after it, and notice
	// is its text (given once for forms that share a done).
	done, notice string
}

// forms are the page's forms.
var forms = []form{
	{pattern: "POST /ui/signout", act: signout, back: "/ui/"},
	{pattern: "POST /ui/boxes", fields: []string{"name"}, act: func(f *formPost) error {
		name := f.get("name")
		bt, err := f.op.AddBox(f.ctx(), operator.NewBox{Name: name})
		if err == nil {
			f.showToken(name, bt.Token, false)
		}
		return err
	}},
	// rotate gives a box a new token; a box given a TTL has its new token
	// given the same.
	{pattern: "POST /ui/boxes/{name}/rotate", act: func(f *formPost) error {
		bt, err := f.op.RotateBoxWith(f.ctx(), f.box, operator.TokenRotation{})
		if err == nil {
			f.showToken(bt.Box.Name, bt.Token, true)
		}
		return err
	}},
	{pattern: "POST /ui/boxes/{name}/settings", fields: []string{"set", "value"}, act: settings, back: "/ui/boxes/{name}"},
	// bind binds the box's token to the source CIDRs of from
	// (comma-separated; empty or "any": every address).
	{pattern: "POST /ui/boxes/{name}/bind", fields: []string{"from"}, act: func(f *formPost) error {
		from := []string{f.raw("from")}
		_, err := f.op.UpdateBox(f.ctx(), f.box, operator.BoxSettings{From: &from})
		return err
	}, back: "/ui/boxes/{name}", done: "bound", notice: "The binding is set; the box's next request is judged by it."},
	{pattern: "POST /ui/boxes/{name}/remove", fields: []string{"confirm"}, act: removeBox, back: "/ui/"},
	{pattern: "POST /ui/boxes/{name}/budget", fields: []string{"usd", "principal"}, box: true, act: func(f *formPost) error {
		p := f.get("principal")
		usd, err := formUSD(f)
		if err != nil {
			return err
		}
		_, err = f.op.SetBudget(f.ctx(), f.box, operator.BudgetSetting{USD: json.Number(usd), Principal: &p})
		return err
	}, back: "/ui/boxes/{name}", done: "budget", notice: "The budget is set; the box's next call is held to it."},
	{pattern: "POST /ui/boxes/{name}/budget/remove", fields: []string{"principal"}, box: true, act: func(f *formPost) error {
		return f.op.RemoveBudget(f.ctx(), f.box, f.get("principal"))
	}, back: "/ui/boxes/{name}", done: "budget-removed", notice: "The budget is removed; the box's calls are measured, not limited."},
	{pattern: "POST /ui/boxes/{name}/window-budget", fields: []string{"window", "usd", "principal"}, box: true, act: setWindowBudget,
		back: "/ui/boxes/{name}", done: "budget"},
	{pattern: "POST /ui/boxes/{name}/window-budget/remove", fields: []string{"window", "principal"}, box: true, act: func(f *formPost) error {
		return f.op.RemoveWindowBudget(f.ctx(), f.box, f.get("principal"), f.raw("window"))
	}, back: "/ui/boxes/{name}", done: "budget-removed"},
	{pattern: "POST /ui/boxes/{name}/rate-limit", fields: []string{"input_tpm", "output_tpm", "rpm", "principal"}, box: true, act: setRateLimit,
		back: "/ui/boxes/{name}", done: "rate", notice: "The rate limit is set; every replica holds the box's calls to it within a second."},
	{pattern: "POST /ui/boxes/{name}/rate-limit/remove", fields: []string{"principal"}, box: true, act: func(f *formPost) error {
		return f.op.RemoveRateLimit(f.ctx(), f.box, f.get("principal"))
	}, back: "/ui/boxes/{name}", done: "rate-removed", notice: "The rate limit is removed."},
	{pattern: "POST /ui/boxes/{name}/secrets", fields: []string{"name", "host", "value"}, act: setSecret,
		back: "/ui/boxes/{name}", done: "secret", notice: "The secret is sealed and set; its value is not shown again."},
	{pattern: "POST /ui/boxes/{name}/secrets/{secret}/remove", act: func(f *formPost) error {
		if err := f.op.RemoveSecret(f.ctx(), f.box, f.r.PathValue("secret")); err != nil {
			return err
		}
		f.u.log.Info("owner's page: secret removed", "box", f.box, "secret", f.r.PathValue("secret"), "admin_token", f.sess.TokenID)
		return nil
	}, back: "/ui/boxes/{name}", done: "secret-removed", notice: "The secret is removed."},
	{pattern: "POST /ui/boxes/{name}/secrets/{secret}/rules", fields: []string{"rules", "rate"}, box: true, act: setSecretRules,
		back: "/ui/boxes/{name}", done: "rules", notice: "The secret's rules are set; the box's next request is held to them."},
	{pattern: "POST /ui/boxes/{name}/grants", fields: []string{"principal", "ttl"}, act: issueGrant},
	{pattern: "POST /ui/boxes/{name}/grants/{id}/revoke", act: func(f *formPost) error {
		return f.op.RevokeBoxGrant(f.ctx(), f.box, f.r.PathValue("id"))
	}, back: "/ui/boxes/{name}"},
	{pattern: "POST /ui/credentials", fields: []string{"name", "weight", "url", "value"}, act: addEntry,
		back: "/ui/credentials", done: "set", notice: "The entry is sealed and set; its value is not shown again."},
	{pattern: "POST /ui/credentials/{entry}", fields: []string{"weight", "url"}, act: editEntry,
		back: "/ui/credentials", done: "changed", notice: "The entry's weight and URL are changed; its value is kept."},
	{pattern: "POST /ui/credentials/{entry}/remove", fields: []string{"confirm"}, act: removeEntry,
		back: "/ui/credentials", done: "removed", notice: "The entry is removed; its boxes are hashed over the others."},
	{pattern: "POST /ui/proxy/ca/rotate", fields: []string{"grace", "confirm"}, act: rotateProxyCA,
		back: "/ui/proxy", done: "rotated", notice: "The egress proxy's CA is rotated: the new certificate is listed below with the moment it signs from. Give box images the certificates below."},
	{pattern: "POST /ui/proposals/{id}/approve", fields: []string{"for"}, proposals: true, act: decide(true), back: "/ui/#waiting"},
	{pattern: "POST /ui/proposals/{id}/deny", proposals: true, act: decide(false), back: "/ui/#waiting"},
	{pattern: "POST /ui/boxes/{name}/approvals/{id}/withdraw", box: true, proposals: true, act: withdraw,
		back: "/ui/boxes/{name}", done: "withdrawn", notice: "The approval is withdrawn; the box's next identical request is refused."},
}

// formPost is one post of a form, as its action sees it.
type formPost struct {
	u    *Page
	w    http.ResponseWriter
	r    *http.Request
	sess *Session
	// op is the operator service acting for the post (Page.op).
	op *operator.Service
	// box is the route's {name}.
	box string
	// vals are the form's fields that its row names.
	vals url.Values
	// answered is set once the action has answered itself.
	answered bool
}

// get is the field name, trimmed.
func (f *formPost) get(name string) string { return strings.TrimSpace(f.vals.Get(name)) }

// raw is the field name as posted.
func (f *formPost) raw(name string) string { return f.vals.Get(name) }

// ctx is the post's context.
func (f *formPost) ctx() context.Context { return f.r.Context() }

// chrome is the page's header for the post's session; the answer to a
// post shows no notice.
func (f *formPost) chrome() chrome {
	return chrome{Broker: f.u.cfg.Broker, Form: FormContext{CSRF: f.sess.CSRF}}
}

// render answers the post with the named template.
func (f *formPost) render(status int, name string, data any) {
	f.answered = true
	f.u.render(f.w, status, name, data)
}

// confirmed reports whether the form's confirm field is name, typed
// again; when it is not, it answers with the confirmation page again,
// tmpl with p, which says why.
func (f *formPost) confirmed(name, tmpl string, p formPage) bool {
	if f.raw("confirm") == name {
		return true
	}
	p.chrome = f.chrome()
	f.render(http.StatusBadRequest, tmpl, p)
	return false
}

// registerForms adds every form's route.
func (u *Page) registerForms() {
	for _, fm := range forms {
		if fm.proposals && u.opts.Approvals == nil {
			continue
		}
		u.HandleUI(fm.pattern, u.post(fm))
	}
}

// post is fm's handler, behind HandleUI's checks: it reads fm's fields
// out of the request, which keeps none of them, runs fm's action and,
// unless the action answered, sends the browser back.
func (u *Page) post(fm form) func(http.ResponseWriter, *http.Request, *Session) error {
	return func(w http.ResponseWriter, r *http.Request, sess *Session) error {
		f := &formPost{u: u, w: w, r: r, sess: sess, op: u.op(r, sess), box: r.PathValue("name"), vals: url.Values{}}
		for _, name := range fm.fields {
			if v, ok := r.PostForm[name]; ok {
				f.vals[name] = v
			}
		}
		r.Form, r.PostForm = url.Values{}, url.Values{}
		if fm.box {
			if _, err := u.a.Box(r); err != nil {
				return err
			}
		}
		if err := fm.act(f); err != nil || f.answered {
			return err
		}
		to := strings.ReplaceAll(fm.back, "{name}", url.PathEscape(f.box))
		if fm.done != "" {
			to += "?done=" + url.QueryEscape(fm.done)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return nil
	}
}

// notice is the notice the page at back shows after a form's ?done=.
func notice(back, done string) string {
	for _, fm := range forms {
		if done != "" && fm.back == back && fm.done == done && fm.notice != "" {
			return fm.notice
		}
	}
	return ""
}

// op is the operator service acting for the page's request r, made in
// session sess: its audit rows name the page's route, status 303 and who
// signed in (actedBy), and its decisions on proposals name sess (decider).
func (u *Page) op(r *http.Request, sess *Session) *operator.Service {
	_, route, _ := strings.Cut(r.Pattern, " ")
	return u.a.Operator().Via(operator.Origin{Method: r.Method, Route: route, Status: http.StatusSeeOther, By: actedBy(sess), Decider: decider(sess)})
}

// signout ends the session in the store, so that its cookie is refused
// wherever it is kept, and clears the cookie.
func signout(f *formPost) error {
	u, sess := f.u, f.sess
	if err := u.cfg.Store.EndSession(f.ctx(), sess.ID, time.Unix(sess.Expires, 0), u.cfg.Now()); err != nil {
		return err
	}
	u.log.Info("owner's page: signed out", "admin_token", sess.TokenID)
	u.setCookie(f.w, f.r, "")
	return nil
}

// settings changes a box's consent or paused from its page.
func settings(f *formPost) error {
	on := f.raw("value") == "true"
	var set operator.BoxSettings
	switch f.raw("set") {
	case "consent":
		set.Consent = &on
	case "paused":
		set.Paused = &on
	default:
		return operator.Errorf(operator.Invalid, "The form names no setting this page changes.")
	}
	_, err := f.op.UpdateBox(f.ctx(), f.box, set)
	return err
}

// removeBox removes a box once its name is typed again on the
// confirmation page.
func removeBox(f *formPost) error {
	name, err := admin.BoxName(f.r)
	if err != nil {
		return err
	}
	if !f.confirmed(name, "remove", formPage{Box: name, Error: "Type the box's name exactly to remove it; nothing was removed."}) {
		return nil
	}
	return f.op.RemoveBox(f.ctx(), name)
}
