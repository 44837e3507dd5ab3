package ui

import (
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
)

// The owner's page's everyday actions: enrol, rotate and remove a box,
// set and remove a budget, set and remove an egress secret. Their forms
// are rows of forms; here are the pages they show and the actions too
// long for a row.

// formPage is the content of a page with one form: enrolling a box, or
// confirming the removal of a box or of a pool entry (Default: the
// shared credential) or the rotation of the egress proxy's CA (Grace:
// the grace typed).
type formPage struct {
	chrome
	Box, Entry string
	Default    bool
	Grace      string
	Error      string
}

// tokenPage shows a box's new token, once.
type tokenPage struct {
	chrome
	Box     string
	Token   string
	Rotated bool
}

func (u *Page) enrolForm(w http.ResponseWriter, r *http.Request, sess *Session) error {
	u.render(w, http.StatusOK, "enrol", formPage{chrome: u.chrome(r, sess)})
	return nil
}

// showToken answers with the one page that shows tok. It is not cached
// and tok is never logged.
func (f *formPost) showToken(box, tok string, rotated bool) {
	f.w.Header().Set("Cache-Control", "no-store")
	f.render(http.StatusOK, "token", tokenPage{chrome: f.chrome(), Box: box, Token: tok, Rotated: rotated})
}

func (u *Page) removeForm(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, "remove", formPage{chrome: u.chrome(r, sess), Box: b.Name})
	return nil
}

// setSecret sets an egress secret from the page's form through the
// operator service, which checks the name, the host and the value. The
// page has no fields for body fields, rules or rate: a value set again
// keeps the secret's, so that setting a value never widens them. No
// message repeats the value.
func setSecret(f *formPost) error {
	name := f.get("name")
	value := f.raw("value")
	rawHost := f.get("host")
	if _, err := f.op.SetSecret(f.ctx(), f.box, name, operator.SecretValue{Host: rawHost, Value: value, Keep: true}); err != nil {
		return err
	}
	f.u.log.Info("owner's page: secret set", "box", f.box, "secret", name, "admin_token", f.sess.TokenID)
	return nil
}
