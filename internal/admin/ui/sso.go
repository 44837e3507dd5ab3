package ui

import (
	"errors"
	"net/http"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/sso"
)

// Single sign-on's hooks into the owner's page (package sso runs the
// flow): the start and callback routes, the check of a single sign-on
// session, the viewer's refusal, and the name audit rows carry.

// registerSSO adds the sign-in routes when single sign-on is on.
func (u *Page) registerSSO() {
	if u.sso == nil {
		return
	}
	u.a.HandleHTTP("GET "+sso.StartPath, u.adapt(func(w http.ResponseWriter, r *http.Request) error {
		const msg = "The identity provider could not be reached; try again, or sign in with an admin token."
		if err := u.sso.Start(w, r); errors.Is(err, sso.ErrRemembered) {
			// The provider was not asked: its failure was logged when it was.
			return operator.Errorf(operator.Upstream, msg)
		} else if err != nil {
			return wrapped(err, operator.Upstream, msg)
		}
		return nil
	}))
	u.a.HandleHTTP("GET "+sso.CallbackPath, u.adapt(u.ssoCallback))
}

// ssoCallback finishes a sign-in and makes the page's session for the
// person, with their role.
func (u *Page) ssoCallback(w http.ResponseWriter, r *http.Request) error {
	id, err := u.sso.Finish(w, r)
	switch {
	case errors.Is(err, sso.ErrFlow):
		// Any client may send the callback with no flow (a page the
		// operator visits, by an <img>), as it may a wrong token to the
		// sign-in form: said at DEBUG, so that it cannot fill the log.
		u.log.Debug("owner's page: single sign-on callback refused", "err", proxy.ScrubKept(err.Error()))
		return operator.Errorf(operator.Invalid,
			"This sign-in did not begin in this browser, was already used, or took too long; nobody is signed in. Sign in again.")
	case errors.Is(err, sso.ErrToken):
		return wrapped(err, operator.Unauthenticated,
			"The identity provider's answer could not be verified; nobody is signed in.")
	case errors.Is(err, sso.ErrNoRole):
		return wrapped(err, operator.Forbidden,
			"%s is signed in at the identity provider, but this broker names them neither an operator nor a viewer; its operator can add them.", id.Name)
	case err != nil:
		return wrapped(err, operator.Upstream,
			"The identity provider could not be reached or answered amiss; nobody is signed in.")
	}
	sess, err := u.newSession("")
	if err != nil {
		return err
	}
	sess.Subject, sess.Issuer, sess.Name, sess.Role = id.Subject, id.Issuer, id.Name, id.Role
	sess.Claim, sess.Grounds = id.Claim, id.Grounds
	if err := u.startSession(w, r, sess); err != nil {
		return err
	}
	u.log.Info("owner's page: signed in", "person", id.Name, "subject", id.Subject, "role", string(id.Role))
	// The session's cookie is SameSite=Strict, which a browser holds back
	// on a redirect that began at the provider: the page moves on from
	// here, on this origin, instead.
	w.Header().Set("Refresh", "0; url=/ui/")
	u.render(w, http.StatusOK, "signedin", id)
	return nil
}

// ssoSession reports whether a session with no admin token is a single
// sign-on session that stands: single sign-on is on, with the issuer
// that signed the person in, and what the person's role rested on at
// sign-in still gives a role under today's lists (sso.RoleOf), which
// becomes the session's role: a person taken off the operators' list is
// a viewer, or signed out, from their next request on.
func (u *Page) ssoSession(sess *Session) bool {
	if u.sso == nil || sess.Subject == "" || sess.Issuer != u.sso.Issuer() {
		return false
	}
	role, ok := u.sso.RoleOf(sess.Claim, sess.Grounds)
	sess.Role = role
	return ok
}

// errViewer is the refusal of a form posted by a viewer: a single
// sign-on viewer, or a session of a viewer's admin token.
func errViewer(sess *Session) error {
	if sess.TokenID != "" {
		return operator.Errorf(operator.Forbidden,
			"You are signed in with the admin token %s, a viewer's: a viewer sees the owner's page and changes nothing. Only an operator can do this: sign in with an operator's admin token.", sess.TokenID)
	}
	return operator.Errorf(operator.Forbidden,
		"You are signed in as %s, a viewer: a viewer sees the owner's page and changes nothing. Only an operator can do this.", sess.Name)
}

// actedBy is what an audit row's message adds to name the person a
// single sign-on session acts for; "" for an admin token's session.
func actedBy(sess *Session) string {
	if sess.TokenID != "" || sess.Name == "" {
		return ""
	}
	return " (by " + sess.Name + ", " + string(sess.Role) + ")"
}

// decider is who a decision made on the page names as its maker: "page:"
// and the admin token's ID for an admin token's session, or the person a
// single sign-on session is for, by name.
func decider(sess *Session) string {
	if sess.TokenID != "" {
		return "page:" + sess.TokenID
	}
	return "page:" + sess.Name
}

// wrapped is a refusal whose cause err is logged, never shown.
func wrapped(err error, code operator.Code, format string, args ...any) error {
	oe := operator.Errorf(code, format, args...)
	oe.Err = err
	return oe
}
