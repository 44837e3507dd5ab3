package ui

import (
	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"

	"encoding/json"
	"net/http"
	"net/url"
	"strings"
)

// The owner's page's everyday actions: enrol, rotate and remove a box,
// set and remove a budget, set and remove an egress secret. Each runs
// behind the session and CSRF checks (HandleUI), does what the admin API
// does, and is recorded in the audit log as an entry whose Capability is
// store.ActorAdmin: the actor is the admin, the route the page's, the
// message what was done — never a token or a value.

// registerActions adds the actions' routes.
func (u *Page) registerActions() {
	u.HandleUI("GET /ui/enrol", u.enrolForm)
	u.HandleUI("POST /ui/boxes", u.enrol)
	u.HandleUI("POST /ui/boxes/{name}/rotate", u.rotate)
	u.HandleUI("POST /ui/boxes/{name}/bind", u.bind)
	u.HandleUI("GET /ui/boxes/{name}/remove", u.removeForm)
	u.HandleUI("POST /ui/boxes/{name}/remove", u.remove)
	u.HandleUI("POST /ui/boxes/{name}/budget", u.setBudget)
	u.HandleUI("POST /ui/boxes/{name}/budget/remove", u.removeBudget)
	u.HandleUI("POST /ui/boxes/{name}/secrets", u.setSecret)
	u.HandleUI("POST /ui/boxes/{name}/secrets/{secret}/remove", u.removeSecret)
	u.HandleUI("POST /ui/boxes/{name}/secrets/{secret}/rules", u.setSecretRules)
	u.registerLimits()
}

// notices are the lines a box's page shows after an action (?done=).
var notices = map[string]string{
	"budget":         "The budget is set; the box's next call is held to it.",
	"budget-removed": "The budget is removed; the box's calls are measured, not limited.",
	"secret":         "The secret is sealed and set; its value is not shown again.",
	"secret-removed": "The secret is removed.",
	"rules":          "The secret's rules are set; the box's next request is held to them.",
	"settings":       "",
	"bound":          "The binding is set; the box's next request is judged by it.",
	"rate":           "The rate limit is set; every replica holds the box's calls to it within a second.",
	"rate-removed":   "The rate limit is removed.",
}

// op is the operator service acting for the page's request r: its audit
// rows name the page's route, status 303 and who signed in (actedBy).
func (u *Page) op(r *http.Request) *operator.Service {
	_, route, _ := strings.Cut(r.Pattern, " ")
	return u.a.Operator().Via(operator.Origin{Method: r.Method, Route: route, Status: http.StatusSeeOther, By: actedBy(r.Context())})
}

// back sends the browser to box's page, with done's notice.
func back(w http.ResponseWriter, r *http.Request, box, done string) {
	http.Redirect(w, r, "/ui/boxes/"+url.PathEscape(box)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

// formPage is the content of a page with one form.
type formPage struct {
	Broker string
	Form   FormContext
	Box    string
	Error  string
}

// tokenPage shows a box's new token, once.
type tokenPage struct {
	Broker  string
	Form    FormContext
	Box     string
	Token   string
	Rotated bool
}

func (u *Page) enrolForm(w http.ResponseWriter, r *http.Request, sess *Session) error {
	u.render(w, http.StatusOK, "enrol", formPage{Broker: u.cfg.Broker, Form: FormContext{CSRF: sess.CSRF}})
	return nil
}

// showToken answers with the one page that shows tok. It is not cached
// and tok is never logged.
func (u *Page) showToken(w http.ResponseWriter, sess *Session, box, tok string, rotated bool) {
	w.Header().Set("Cache-Control", "no-store")
	u.render(w, http.StatusOK, "token", tokenPage{Broker: u.cfg.Broker, Form: FormContext{CSRF: sess.CSRF}, Box: box, Token: tok, Rotated: rotated})
}

func (u *Page) enrol(w http.ResponseWriter, r *http.Request, sess *Session) error {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	bt, err := u.op(r).AddBox(r.Context(), operator.NewBox{Name: name})
	if err != nil {
		return err
	}
	u.showToken(w, sess, name, bt.Token, false)
	return nil
}

// rotate gives a box a new token; a box given a TTL has its new token
// given the same.
func (u *Page) rotate(w http.ResponseWriter, r *http.Request, sess *Session) error {
	bt, err := u.op(r).RotateBoxWith(r.Context(), r.PathValue("name"), operator.TokenRotation{})
	if err != nil {
		return err
	}
	u.showToken(w, sess, bt.Box.Name, bt.Token, true)
	return nil
}

func (u *Page) removeForm(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	u.render(w, http.StatusOK, "remove", formPage{Broker: u.cfg.Broker, Form: FormContext{CSRF: sess.CSRF}, Box: b.Name})
	return nil
}

// remove removes a box once its name is typed again on the confirmation page.
func (u *Page) remove(w http.ResponseWriter, r *http.Request, sess *Session) error {
	name, err := admin.BoxName(r)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != name {
		u.render(w, http.StatusBadRequest, "remove", formPage{Broker: u.cfg.Broker, Form: FormContext{CSRF: sess.CSRF}, Box: name,
			Error: "Type the box's name exactly to remove it; nothing was removed."})
		return nil
	}
	if err := u.op(r).RemoveBox(r.Context(), name); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	return nil
}

func (u *Page) setBudget(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	p := strings.TrimSpace(r.PostForm.Get("principal"))
	usd, err := formUSD(r)
	if err != nil {
		return err
	}
	if _, err := u.op(r).SetBudget(r.Context(), b.Name, operator.BudgetSetting{USD: json.Number(usd), Principal: &p}); err != nil {
		return err
	}
	back(w, r, b.Name, "budget")
	return nil
}

func (u *Page) removeBudget(w http.ResponseWriter, r *http.Request, sess *Session) error {
	b, err := u.a.Box(r)
	if err != nil {
		return err
	}
	if err := u.op(r).RemoveBudget(r.Context(), b.Name, strings.TrimSpace(r.PostForm.Get("principal"))); err != nil {
		return err
	}
	back(w, r, b.Name, "budget-removed")
	return nil
}

// setSecret sets an egress secret from the page's form through the
// operator service, which checks the name, the host and the value. The
// page has no fields for body fields, rules or rate: a value set again
// keeps the secret's, so that setting a value never widens them. No
// message repeats the value.
func (u *Page) setSecret(w http.ResponseWriter, r *http.Request, sess *Session) error {
	name := strings.TrimSpace(r.PostForm.Get("name"))
	value := r.PostForm.Get("value")
	r.PostForm.Del("value")
	rawHost := strings.TrimSpace(r.PostForm.Get("host"))
	if len(value) >= operator.MinSecretLen && strings.Contains(rawHost, value) {
		// The refusal of a bad host repeats the host; one holding the
		// value would put the value in the page.
		return operator.Errorf(operator.Invalid,
			"The host holds the secret's value; the value goes only in the value field, and the host is the base URL it may be sent to, such as https://api.stripe.com.")
	}
	box := r.PathValue("name")
	if _, err := u.op(r).SetSecret(r.Context(), box, name, operator.SecretValue{Host: rawHost, Value: value, Keep: true}); err != nil {
		return err
	}
	u.log.Info("owner's page: secret set", "box", box, "secret", name, "admin_token", sess.TokenID)
	back(w, r, box, "secret")
	return nil
}

func (u *Page) removeSecret(w http.ResponseWriter, r *http.Request, sess *Session) error {
	box := r.PathValue("name")
	if err := u.op(r).RemoveSecret(r.Context(), box, r.PathValue("secret")); err != nil {
		return err
	}
	u.log.Info("owner's page: secret removed", "box", box, "secret", r.PathValue("secret"), "admin_token", sess.TokenID)
	back(w, r, box, "secret-removed")
	return nil
}

// bind binds a box's token to the source CIDRs of the form's from
// (comma-separated; empty or "any": every address).
func (u *Page) bind(w http.ResponseWriter, r *http.Request, sess *Session) error {
	from := []string{r.PostForm.Get("from")}
	v, err := u.op(r).UpdateBox(r.Context(), r.PathValue("name"), operator.BoxSettings{From: &from})
	if err != nil {
		return err
	}
	back(w, r, v.Name, "bound")
	return nil
}
