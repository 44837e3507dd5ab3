// Package ui is the owner's page: server-rendered HTML under /ui/ on the
// admin listener, beside the JSON admin API of package admin, whose
// routes, Host check and store it shares; GET / on the listener goes to
// it. It signs in with an admin
// token, which it exchanges for a session: the cookie holds a session
// sealed under the master key (its own ID, the admin token's ID, an
// expiry and a CSRF secret), never the token. Signing out records the
// session's ID in the store as ended, so its cookie is refused from then
// on, on every replica, even if kept. Every POST carries the CSRF secret
// in a form field and, when the browser sends Origin, must come from this
// origin; the cookie is HttpOnly and SameSite=Strict.
//
// No page, log line or error carries a token, a credential or a secret's
// value, except the one page that shows a box token or a grant just made.
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/approval"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/spend"
	"github.com/intentius/boxbroker/internal/sso"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

//go:embed *.html style.css
var files embed.FS

// SessionCookie is the owner's page's cookie.
const SessionCookie = "boxbroker_session"

// sessionAD is the additional data a session is sealed with.
const sessionAD = "admin-session"

// Session is a signed-in owner's page session.
type Session struct {
	// ID names the session, so that signing out can end it in the store.
	ID string `json:"i"`
	// TokenID is the admin token it was signed in with; revoking that
	// token ends the session.
	TokenID string `json:"t"`
	// Expires is when it ends, Unix seconds.
	Expires int64 `json:"e"`
	// CSRF is the secret every form posts back.
	CSRF string `json:"c"`
	// Subject, Issuer and Name are the person a single sign-on session
	// is for (package sso); TokenID is then "". Name is how audit rows
	// and logs name them.
	Subject string `json:"s,omitempty"`
	Issuer  string `json:"o,omitempty"`
	Name    string `json:"n,omitempty"`
	// Role is what the session may do. A single sign-on session's is
	// judged from Claim and Grounds, an admin token's session's is its
	// token's (sso.Operator for an operator's, sso.Viewer for any other),
	// each again at every request (Page.session).
	Role sso.Role `json:"r,omitempty"`
	// Claim and Grounds are what a single sign-on session's role rests
	// on (sso.Identity's): its role is judged again from them on every
	// request.
	Claim   string   `json:"k,omitempty"`
	Grounds []string `json:"g,omitempty"`
}

// CanAct reports whether the session may post a form that changes
// anything: an operator's, by single sign-on or an operator's admin
// token.
func (s *Session) CanAct() bool { return s.Role.CanAct() }

// tokenRole is the role of a session signed in with an admin token of
// role: an operator's token's is an operator's, any other a viewer's.
func tokenRole(role store.AdminRole) sso.Role {
	if role.CanWrite() {
		return sso.Operator
	}
	return sso.Viewer
}

// FormContext is what a page section needs to render a form that posts
// back: the session's CSRF secret, to put in a hidden "csrf" field.
type FormContext struct {
	CSRF string
}

// CSRFField is the hidden input a form on the owner's page must carry.
func (f FormContext) CSRFField() template.HTML {
	return template.HTML(`<input type="hidden" name="csrf" value="` + template.HTMLEscapeString(f.CSRF) + `">`)
}

// chrome is what every page with the top bar shows: the broker's name,
// the sign-out form, which needs the session's CSRF secret, and the
// notice a form's ?done= names for the page it went back to.
type chrome struct {
	Broker string
	Form   FormContext
	Notice string
}

// chrome is the top bar's content for r's session sess, with the notice
// r's ?done= names for r's route (notice).
func (u *Page) chrome(r *http.Request, sess *Session) chrome {
	_, route, _ := strings.Cut(r.Pattern, " ")
	return chrome{Broker: u.cfg.Broker, Form: FormContext{CSRF: sess.CSRF}, Notice: notice(route, r.URL.Query().Get("done"))}
}

// BoxSection is a part of a box's page added by a later part of boxbroker
// (grants, with their issue and revoke forms). Render returns the
// section's HTML, built with html/template; forms in it post to routes
// added with HandleUI and carry form.CSRFField().
type BoxSection struct {
	Title  string
	Render func(ctx context.Context, box string, form FormContext) (template.HTML, error)
}

// Config configures the owner's page.
type Config struct {
	// SessionTTL bounds a session (default 12 hours).
	SessionTTL time.Duration
	// SSO, when enabled, adds single sign-on with OpenID Connect beside
	// the admin token (package sso).
	SSO sso.Config
	// DeadLetters, when set, counts the batches of records the store
	// refused for good on this replica; the list of boxes shows a line
	// while there are any.
	DeadLetters func() int
	// Approvals, when set, lists pending proposals at the top of the
	// list of boxes ("waiting for you") with forms to approve or deny
	// each.
	Approvals *approval.Service
}

// Page is the owner's page. Its routes are on the admin Server it was
// made for.
type Page struct {
	a        *admin.Server
	cfg      admin.Config // a's, with its defaults
	log      *slog.Logger
	opts     Config // the page's own, with its defaults
	tmpl     *template.Template
	mu       sync.RWMutex // guards sections
	sections []BoxSection
	// hours holds the broker's settled hours for the list's chart.
	hours hourCache
	// sso is single sign-on; nil when off.
	sso *sso.Provider
}

// New adds the owner's page's routes to a, which serves them beside the
// admin API, and returns the page. It must be called before a serves;
// the only error is a template that does not parse.
func New(a *admin.Server, cfg Config) (*Page, error) {
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	acfg := a.Config()
	u := &Page{a: a, cfg: acfg, log: acfg.Logger, opts: cfg}
	t, err := template.New("ui").Funcs(template.FuncMap{
		"ago":        func(at string) string { return ago(at, acfg.Now()) },
		"until":      func(at *string) string { return until(at, acfg.Now()) },
		"usd":        usd,
		"ratio":      ratio,
		"join":       strings.Join,
		"deref":      func(p *string) string { return deref(p, "") },
		"orNone":     func(p *string) string { return deref(p, "(none)") },
		"status":     func(p *int) string { return derefInt(p) },
		"escPath":    url.PathEscape,
		"agoTime":    func(t time.Time) string { return ago(protocol.FormatTime(t), acfg.Now()) },
		"micro":      spend.FormatUSD,
		"stateLabel": stateLabel,
		"size":       size,
		"hasPrefix":  strings.HasPrefix,
		"auditMax":   func() int { return admin.DefaultAuditExport },
		"failure":    failure,
		"gauge":      gauge,
		"reasonText": reasonText,
		"rate":       spend.FormatDollars, // a price per million tokens: micro-dollars per token
		"tokens":     spend.FormatTokens,
	}).ParseFS(files, "*.html")
	if err != nil {
		return nil, fmt.Errorf("owner's page templates: %w", err)
	}
	u.tmpl = t
	if cfg.SSO.Enabled() {
		if u.sso, err = sso.New(cfg.SSO, acfg.Keyring, acfg.Now); err != nil {
			return nil, err
		}
	}
	u.register()
	u.addGrantsPage()
	if u.opts.Approvals != nil {
		u.addApprovalsSection()
	}
	u.registerSSO()
	u.registerForms()
	return u, nil
}

// register adds the page's routes but its forms' (registerForms) and
// single sign-on's (registerSSO).
func (u *Page) register() {
	u.a.HandleHTTP("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	u.a.HandleHTTP("GET /ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
	u.a.HandleHTTP("GET /ui/{$}", u.adapt(u.home))
	u.a.HandleHTTP("GET /ui/style.css", http.HandlerFunc(u.style))
	u.a.HandleHTTP("POST /ui/signin", u.adapt(u.signin))
	u.HandleUI("GET /ui/boxes/{name}", u.boxPage)
	u.HandleUI("GET /ui/boxes/{name}/remove", u.removeForm)
	u.HandleUI("GET /ui/enrol", u.enrolForm)
	u.HandleUI("GET /ui/credentials", u.poolPage)
	u.HandleUI("GET /ui/credentials/{entry}/remove", u.removeEntryForm)
	u.HandleUI("GET /ui/proxy", u.proxyPage)
	u.HandleUI("GET /ui/proxy/ca.pem", u.proxyCAPEM)
	u.HandleUI("GET /ui/spend", u.spendPage)
	// The downloads of the fleet's spend and of the audit log are the
	// admin API's GET /api/spend.csv and /api/audit.csv handlers, so the
	// two answer the same bytes.
	u.HandleUI("GET /ui/spend.csv", func(w http.ResponseWriter, r *http.Request, _ *Session) error { return u.a.SpendCSV(w, r) })
	u.HandleUI("GET /ui/audit.csv", func(w http.ResponseWriter, r *http.Request, _ *Session) error { return u.a.AuditCSV(w, r) })
}

// AddBoxSection adds a section to every box's page, after the standard
// ones. It is the owner's page's extension point for grants.
func (u *Page) AddBoxSection(sec BoxSection) {
	u.mu.Lock()
	u.sections = append(u.sections, sec)
	u.mu.Unlock()
}

// HandleUI adds an owner's page route, such as
// "POST /ui/boxes/{name}/grants/{id}/revoke". Its handler runs only for a
// signed-in session; for any method but GET and HEAD, only when the form's
// csrf field is the session's and the request comes from this origin. A
// handler answers with HTML, or returns an error shown as an error page.
// It must be called before the admin Server serves.
func (u *Page) HandleUI(pattern string, h func(w http.ResponseWriter, r *http.Request, sess *Session) error) {
	u.a.HandleHTTP(pattern, u.adapt(u.signedIn(h)))
}

// pageHeaders sets what every page answers with: no framing, no scripts,
// no referrer to other sites. (Not no-referrer: with it a browser sends
// "Origin: null" on the page's own POSTs, which sameOrigin refuses.) No
// page is cached: admin.Server answers everything with Cache-Control:
// no-store, which only the style sheet overrides.
func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
}

// pageError is an error page's content.
type pageError struct {
	Status  int
	Message string
}

// adapt renders a page handler's error as an HTML error page: an
// *operator.Error, or a store's unavailability (operator.StoreError),
// shows its message, anything else a generic one, its text logged.
func (u *Page) adapt(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w.Header())
		err := operator.StoreError(h(w, r), "", "")
		if err == nil {
			return
		}
		status, _, msg := admin.Refusal(err)
		var oe *operator.Error
		if !errors.As(err, &oe) {
			msg = "The broker could not show this page."
		}
		if !errors.As(err, &oe) || oe.Err != nil {
			u.log.Error("owner's page failed", "method", r.Method, "path", proxy.ScrubKept(r.URL.Path), "status", status, "err", proxy.ScrubKept(err.Error()))
		}
		u.render(w, status, "error", pageError{Status: status, Message: proxy.ScrubKept(msg)})
	})
}

// render writes the named template with data.
func (u *Page) render(w http.ResponseWriter, status int, name string, data any) {
	h, err := u.fragment(name, data)
	if err != nil {
		u.log.Error("owner's page template", "template", name, "err", err)
		http.Error(w, "The broker could not show this page.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(h))
}

// fragment is the named template executed with data: a page, or a part
// of one.
func (u *Page) fragment(name string, data any) (template.HTML, error) {
	var b strings.Builder
	err := u.tmpl.ExecuteTemplate(&b, name, data)
	return template.HTML(b.String()), err
}

func (u *Page) style(w http.ResponseWriter, r *http.Request) {
	b, err := files.ReadFile("style.css")
	if err != nil {
		http.Error(w, "no style", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}

// newSession makes a session for the admin token with that ID.
func (u *Page) newSession(tokenID string) (*Session, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return &Session{ID: hex.EncodeToString(b[:16]), TokenID: tokenID, Expires: u.cfg.Now().Add(u.opts.SessionTTL).Unix(), CSRF: hex.EncodeToString(b[16:])}, nil
}

// startSession seals sess into the session cookie and sets it.
func (u *Page) startSession(w http.ResponseWriter, r *http.Request, sess *Session) error {
	j, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	sealed, err := u.cfg.Keyring.Seal(j, sessionAD)
	if err != nil {
		return fmt.Errorf("seal session: %w", err)
	}
	u.setCookie(w, r, base64.RawURLEncoding.EncodeToString(sealed))
	return nil
}

// errNoSession means the request holds no current session.
var errNoSession = errors.New("no session")

// session opens the request's cookie and checks that it has not expired
// or been signed out, and that its admin token still stands.
func (u *Page) session(r *http.Request) (*Session, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 4096 {
		return nil, errNoSession
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil, errNoSession
	}
	j, err := u.cfg.Keyring.Open(sealed, sessionAD)
	if err != nil {
		return nil, errNoSession
	}
	var sess Session
	// A session with no ID (sealed before sessions had one) could not be
	// signed out: it is refused, and its owner signs in again.
	if err := json.Unmarshal(j, &sess); err != nil || sess.ID == "" || sess.CSRF == "" {
		return nil, errNoSession
	}
	if u.cfg.Now().Unix() >= sess.Expires {
		return nil, errNoSession
	}
	if sess.TokenID == "" {
		// A single sign-on session stands while single sign-on is on
		// with the issuer that signed it.
		if !u.ssoSession(&sess) {
			return nil, errNoSession
		}
	} else if t, err := u.cfg.Store.AdminToken(r.Context(), sess.TokenID); errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession // the token was revoked
	} else if err != nil {
		return nil, err
	} else {
		sess.Role = tokenRole(t.Role)
	}
	if ended, err := u.cfg.Store.SessionEnded(r.Context(), sess.ID); err != nil {
		return nil, err
	} else if ended {
		return nil, errNoSession // signed out
	}
	return &sess, nil
}

// setCookie sets (value non-empty) or clears the session cookie.
func (u *Page) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	c := &http.Cookie{
		Name: SessionCookie, Value: value, Path: "/ui/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r),
		MaxAge: int(u.opts.SessionTTL.Seconds()),
	}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// secure reports whether the session cookie set in answer to r is to be
// Secure: the browser reached the page over https, through TLS of the
// admin listener's own or a TLS-terminating proxy in front of it, as it
// says by the sign-in form's Origin or by naming the host of single
// sign-on's https redirect URL (sso.Provider.Secure).
func (u *Page) secure(r *http.Request) bool {
	if u.sso != nil {
		return u.sso.Secure(r)
	}
	return sso.OverHTTPS(r)
}

// sameOrigin reports whether a POST may have come from this origin: the
// browser sent no Origin, or one naming this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
}

var errForbiddenPost = operator.Errorf(operator.Forbidden,
	"This form did not come from the owner's page, or is from an earlier sign-in; go back, reload and try again.")

// signedIn runs h only for a current session; an unsafe method also needs
// the session's CSRF secret in the form and a same-origin request. With no
// session, a GET goes to the sign-in page and anything else is a 401.
func (u *Page) signedIn(h func(http.ResponseWriter, *http.Request, *Session) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		sess, err := u.session(r)
		if errors.Is(err, errNoSession) {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/ui/", http.StatusSeeOther)
				return nil
			}
			return operator.Errorf(operator.Unauthenticated, "You are not signed in, or your session has ended; sign in again.")
		}
		if err != nil {
			return err
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
			if !sameOrigin(r) || r.ParseForm() != nil ||
				subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.CSRF)) != 1 {
				return errForbiddenPost
			}
			if !sess.CanAct() && r.Pattern != "POST /ui/signout" {
				return errViewer(sess)
			}
		}
		return h(w, r, sess)
	}
}

// signinPage is the sign-in form's content.
type signinPage struct {
	Broker string
	Error  string
	// SSO shows the single sign-on link.
	SSO bool
}

// home is the boxes overview, or the sign-in form with no session.
func (u *Page) home(w http.ResponseWriter, r *http.Request) error {
	sess, err := u.session(r)
	if errors.Is(err, errNoSession) {
		if _, cerr := r.Cookie(SessionCookie); cerr == nil {
			u.setCookie(w, r, "") // an old or forged cookie: drop it
		}
		u.render(w, http.StatusOK, "signin", signinPage{Broker: u.cfg.Broker, SSO: u.sso != nil})
		return nil
	}
	if err != nil {
		return err
	}
	return u.overview(w, r, sess)
}

func (u *Page) signin(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !sameOrigin(r) || r.ParseForm() != nil {
		return errForbiddenPost
	}
	t, err := u.a.Lookup(r.Context(), strings.TrimSpace(r.PostForm.Get("token")))
	if errors.Is(err, token.ErrMissing) || errors.Is(err, token.ErrUnknown) {
		u.render(w, http.StatusUnauthorized, "signin", signinPage{Broker: u.cfg.Broker, SSO: u.sso != nil,
			Error: "That is not an admin token at this broker. `boxbroker admin token` makes one."})
		return nil
	}
	if err != nil {
		return err
	}
	sess, err := u.newSession(t.ID)
	if err != nil {
		return err
	}
	// The cookie names the token alone: its role is read with it at
	// every request (session).
	if err := u.startSession(w, r, sess); err != nil {
		return err
	}
	u.log.Info("owner's page: signed in", "admin_token", t.ID, "role", string(tokenRole(t.Role)))
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	return nil
}
