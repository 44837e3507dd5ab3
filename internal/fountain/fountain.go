// Package fountain serves /fountain/api/..., Fountain's API for the box:
// it forwards a request the box's declaration allows to the operator's
// Fountain API with the operator's Fountain key as the bearer in place of
// the box's token, and streams the answer back.
//
// The scope words are the ones the declaration documents for Fountain:
// agent for POST /fountain/api/conversations exactly (starting a
// conversation), conversations for the rest of /fountain/api/conversations,
// sandboxes for /fountain/api/sandboxes and vault for /fountain/api/vaults.
// Any other path under /fountain is a 404 that reaches no upstream.
//
// The box's own: the broker records the id of each conversation a box
// starts through it (read from Fountain's answer) as the box's, and the
// operator assigns sandboxes and vaults to boxes. Every id the box names
// must be recorded as this box's, or the request is a 403 that reaches no
// upstream: the segment after conversations/, sandboxes/ or vaults/ in
// the path, and every value of a query parameter or JSON (or form) body
// member whose name IDKind reads as a kind's, such as sandbox_id or
// vaultIds. A listing (a GET of a family with no id) is answered with
// only the box's own items: Fountain's JSON answer is held and every
// array in it keeps only the elements recorded as the box's.
//
// Nothing secret crosses: tokens and grants the box writes in headers,
// path, query or body are replaced by proxy.TokenMarker before the
// request goes upstream, and the operator's key is replaced by KeyMarker
// wherever Fountain's answer repeats it (headers, 1xx headers, body,
// trailers). docs/fountain.md says exactly what is and is not checked.
package fountain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/defaults"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// Scope words of the fountain capability.
const (
	WordAgent         = "agent"
	WordConversations = "conversations"
	WordSandboxes     = "sandboxes"
	WordVault         = "vault"
)

// MaxRecord bounds how much of Fountain's answer to
// POST /api/conversations the broker holds to read the new conversation's
// id: 64 KiB. A longer answer is streamed through and its conversation is
// not recorded.
const MaxRecord = 64 << 10

// Family is one family of Fountain's API routes: its path segment under
// /fountain/api, the scope word it needs, and the kind of resource its ids
// name.
type Family struct {
	Segment string
	Word    string
	Kind    string
}

// Families are the route families served, in the order checked.
var Families = []Family{
	{Segment: "conversations", Word: WordConversations, Kind: store.ResourceConversation},
	{Segment: "sandboxes", Word: WordSandboxes, Kind: store.ResourceSandbox},
	{Segment: "vaults", Word: WordVault, Kind: store.ResourceVault},
}

// Route is what a path under /fountain names.
type Route struct {
	// Family is the route family.
	Family Family
	// Path is the path Fountain is asked for: the request's path less
	// /fountain, such as /api/conversations/c1/messages.
	Path string
	// ID is the segment after the family's, such as c1; "" for none.
	ID string
}

// Parse returns the route path names, or ok false for a path the
// capability does not serve: one outside the three families, or one with
// an empty segment (other than a trailing slash), a "." or ".." segment, a
// backslash or a control character, or a segment that holds one of these
// or a "/" once percent-decoded again (%252e%252e) or that is a dot
// segment before a ";" (..;x), which an upstream could read as another
// path than the one whose scope word and id were judged.
func Parse(path string) (rt Route, ok bool) {
	p, found := strings.CutPrefix(path, protocol.PrefixFountain+"/api/")
	if !found {
		return Route{}, false
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if (s == "" && i != len(segs)-1) || unsafeSegment(s) {
			return Route{}, false
		}
		// An upstream that decodes the path once more, or reads a
		// ";" as the start of parameters, must read no other path either.
		if u, err := url.PathUnescape(s); err == nil && u != s && (u == "" || strings.Contains(u, "/") || unsafeSegment(u)) {
			return Route{}, false
		}
		if before, _, found := strings.Cut(s, ";"); found && (before == "." || before == "..") {
			return Route{}, false
		}
	}
	for _, f := range Families {
		if segs[0] == f.Segment {
			rt = Route{Family: f, Path: strings.TrimPrefix(path, protocol.PrefixFountain)}
			if len(segs) > 1 {
				rt.ID = segs[1]
			}
			return rt, true
		}
	}
	return Route{}, false
}

func unsafeRune(r rune) bool { return r == '\\' || r < 0x20 || r == 0x7f }

// unsafeSegment reports whether s is a dot segment or holds a backslash
// or a control character.
func unsafeSegment(s string) bool {
	return s == "." || s == ".." || strings.ContainsFunc(s, unsafeRune)
}

// starts reports whether method and route start a conversation: POST
// /fountain/api/conversations exactly.
func starts(method string, rt Route) bool {
	return method == http.MethodPost && rt.Path == "/api/conversations"
}

// KeyFunc returns the operator's Fountain key, or
// capability.ErrNoCredential when the operator has set none.
type KeyFunc func(ctx context.Context) ([]byte, error)

// Config configures the capability.
type Config struct {
	// Upstream is the Fountain API's base URL; a request for
	// /fountain/api/x goes to Upstream's path joined with /api/x.
	Upstream *url.URL
	// Transport carries requests upstream.
	Transport http.RoundTripper
	// Resources records and answers which box owns which Fountain id,
	// and reads the box of an id it refuses to record for the box's token
	// (capability.TokenGone).
	Resources interface {
		store.Resources
		capability.BoxReader
	}
	// Key returns the operator's Fountain key.
	Key KeyFunc
	// MaxBody bounds a request body in bytes (default protocol.DefaultMaxBody, 64 MiB).
	MaxBody int64
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives upstream failures and unrecorded conversations;
	// never the key.
	Logger *slog.Logger
	// Audit, when set, is given an entry for every answer that held the
	// box's own token (capability.ReasonTokenSeen); never the token.
	Audit interface{ Add(e store.AuditEntry) bool }
}

// Capability is the /fountain capability.
type Capability struct {
	cfg   Config
	proxy *proxy.Forwarder
	fail  func(http.ResponseWriter, *http.Request, error)
}

type ctxKey struct{}

// call carries what Serve learnt to the proxy's Rewrite and ModifyResponse
// within one request.
type call struct {
	key []byte
	box string
	// admitted is the box as the broker admitted the request.
	admitted store.Box
	token    string // the box's token, watched for in the answer
	// tokenHash is token's hash, as the box was admitted with it: the
	// box's ids are read while it holds that token.
	tokenHash string
	starts    bool
	// listing is the kind a family-wide GET (a listing) lists, "" for
	// any other request.
	listing string
}

// New returns the capability.
func New(cfg Config) *Capability {
	defaults.Positive(&cfg.MaxBody, protocol.DefaultMaxBody)
	defaults.Clock(&cfg.Now)
	defaults.Logger(&cfg.Logger)
	cfg.Transport = proxy.Outbound(cfg.Transport)
	c := &Capability{cfg: cfg, fail: proxy.ErrorHandler(cfg.Logger, "Fountain API")}
	c.proxy = proxy.New(c.rewrite, cfg.Transport, c.errorHandler)
	c.proxy.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)
	c.proxy.ModifyResponse = c.modifyResponse
	c.proxy.Informational = c.informational
	return c
}

// Name is "fountain".
func (c *Capability) Name() string { return protocol.Fountain }

// Prefixes is /fountain.
func (c *Capability) Prefixes() []string { return []string{protocol.PrefixFountain} }

// Scopes returns agent for POST /fountain/api/conversations, the family's
// word for any other request in a family, and ok false for any other path.
func (c *Capability) Scopes(r *http.Request) (capability.Need, bool, error) {
	rt, ok := Parse(r.URL.Path)
	if !ok {
		return capability.Need{}, false, nil
	}
	if starts(r.Method, rt) {
		return capability.Need{Words: []string{WordAgent}}, true, nil
	}
	return capability.Need{Words: []string{rt.Family.Word}}, true, nil
}

// Serve checks that an id the path names is this box's, then forwards the
// request on the operator's key.
func (c *Capability) Serve(w http.ResponseWriter, r *http.Request, cl *capability.Call) error {
	rt, ok := Parse(r.URL.Path)
	if !ok {
		return capability.NotFound(r)
	}
	if rt.ID != "" {
		if err := c.own(r.Context(), cl, rt.Family.Kind, rt.ID, "the path"); err != nil {
			return err
		}
	}
	key, err := c.cfg.Key(r.Context())
	if errors.Is(err, capability.ErrNoCredential) {
		return capability.Refuse(capability.ReasonNoCredential,
			"The operator has set no Fountain key at this broker, so it forwards nothing to Fountain; the operator sets one with `boxbroker credential set fountain`.")
	}
	if err != nil {
		return capability.Refuse(capability.ReasonStore, "The broker could not read the operator's Fountain key.").WithErr(err)
	}
	if r.ContentLength > c.cfg.MaxBody {
		return capability.TooLarge(c.cfg.MaxBody)
	}
	r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBody)
	body, err := c.checkRequest(r.Context(), cl, r)
	if err != nil {
		return err
	}
	r.Body = body
	k := &call{key: key, box: cl.Box.Name, admitted: cl.Box, token: cl.Token, tokenHash: cl.TokenHash, starts: starts(r.Method, rt)}
	if rt.ID == "" && r.Method == http.MethodGet {
		k.listing = rt.Family.Kind
	}
	c.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, k)))
	return nil
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (c *Capability) rewrite(pr *httputil.ProxyRequest) {
	cl := pr.In.Context().Value(ctxKey{}).(*call)
	// No method override is sent (StripBoxHeaders takes the path
	// overrides), so that Fountain acts on the method the broker judged.
	proxy.StripBoxHeaders(pr.Out.Header)
	proxy.DelHeaders(pr.Out.Header, proxy.MethodOverrides...)
	n := proxy.ScrubHeader(pr.Out.Header)
	// The answer is scanned for the key: ask for it uncompressed.
	pr.Out.Header.Del("Accept-Encoding")
	pr.Out.Header.Set("Authorization", "Bearer "+string(cl.key))
	p, np := proxy.ScrubTokens(strings.TrimPrefix(pr.In.URL.Path, protocol.PrefixFountain))
	q, nq := proxy.ScrubTokens(pr.In.URL.RawQuery)
	if n+np+nq > 0 {
		c.cfg.Logger.Warn("fountain: replaced tokens the box sent in headers, path or query", "box", cl.box, "headers", n, "path", np, "query", nq)
	}
	proxy.Target(pr.Out, c.cfg.Upstream, p, q)
}

// KeyMarker is what replaces the operator's key wherever Fountain's
// answer repeats it.
const KeyMarker = "[fountain key removed]"

// keyForms are what an answer is searched for: the key, as it is or with
// any of its bytes percent- or JSON-escaped, as egress searches for a
// secret's value.
func (cl *call) keyForms() []proxy.Form {
	return []proxy.Form{{Old: cl.key, New: []byte(KeyMarker), Escaped: true}}
}

// informational removes the key from a 1xx answer's header.
func (c *Capability) informational(r *http.Request, h http.Header) {
	cl, _ := r.Context().Value(ctxKey{}).(*call)
	if cl == nil {
		clear(h)
		return
	}
	if n := proxy.RedactHeader(h, cl.keyForms()); n > 0 {
		c.cfg.Logger.Warn("fountain: replaced the key Fountain repeated in a 1xx answer's headers", "box", cl.box, "headers", n)
	}
}

func (c *Capability) modifyResponse(resp *http.Response) error {
	cl := resp.Request.Context().Value(ctxKey{}).(*call)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errUpgraded
	}
	seen := c.watchToken(resp, cl) // before the key is redacted
	forms := cl.keyForms()
	if n := proxy.RedactHeader(resp.Header, forms); n > 0 {
		c.cfg.Logger.Warn("fountain: replaced the key Fountain repeated in answer headers", "box", cl.box, "headers", n)
	}
	proxy.RedactHeader(resp.Trailer, forms)
	// Asked for none: an encoded answer, or one whose header is not one
	// identity, cannot be scanned for the key.
	if err := proxy.Unencoded(resp.Header); err != nil {
		return err
	}
	if cl.listing != "" {
		if err := c.filterListing(resp, cl); err != nil {
			return err
		}
	}
	if cl.starts && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if err := c.record(resp, cl); err != nil {
			return err
		}
	}
	if resp.Request.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	proxy.NewFormSet(forms).RedactAnswer(resp, seen.Body(resp.Body), func(replaced int) {
		c.cfg.Logger.Warn("fountain: replaced the key Fountain repeated in an answer body", "box", cl.box, "times", replaced)
	})
	return nil
}

// errUpgraded refuses an answer that switched protocols, which cannot be
// scanned for the key.
var errUpgraded = capability.Refuse(capability.ReasonUpstream, "Fountain switched protocols, which the broker does not carry.")

// record reads the id of the conversation Fountain started from its
// answer, and records it as the box's before any of the answer reaches the
// box, so the box can use the id at once. It holds at most MaxRecord bytes
// of the answer; a longer answer, or a stream, is passed on unrecorded.
func (c *Capability) record(resp *http.Response, cl *call) error {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		c.cfg.Logger.Warn("fountain: a started conversation's answer is a stream; not recorded", "box", cl.box)
		return nil
	}
	held, err := io.ReadAll(io.LimitReader(resp.Body, MaxRecord+1))
	if err != nil {
		return fmt.Errorf("read the answer to a started conversation: %w", err)
	}
	resp.Body = proxy.PutBack(held, resp.Body)
	if int64(len(held)) > MaxRecord {
		c.cfg.Logger.Warn("fountain: a started conversation's answer is over the bound; not recorded", "box", cl.box, "bound", MaxRecord)
		return nil
	}
	id, ok := conversationID(held)
	if !ok {
		c.cfg.Logger.Warn("fountain: a started conversation's answer names no usable id; not recorded", "box", cl.box)
		return nil
	}
	// Recorded only while the box holds the token its request was
	// admitted with: a box added since under the name of one removed
	// meanwhile did not start it, and is not to own it.
	err = c.cfg.Resources.AddBoxResource(resp.Request.Context(), store.Resource{
		Box: cl.box, Kind: store.ResourceConversation, ID: id, At: c.cfg.Now().UTC(),
	}, cl.tokenHash)
	switch {
	case errors.Is(err, store.ErrGraceEnded) || errors.Is(err, store.ErrTokenExpired):
		// Admitted within its token's grace or lifetime, recorded past it.
		return capability.Refuse(capability.ReasonExpired, "The token this conversation was started with is no longer taken: its lifetime, or the grace after its rotation, ended as the broker recorded it, so the broker did not pass it on.").WithErr(fmt.Errorf("conversation %q started by box %s past its token's lifetime: %w", id, cl.box, err))
	case errors.Is(err, store.ErrNotFound):
		return capability.TokenGone(resp.Request.Context(), c.cfg.Resources, cl.admitted).WithErr(fmt.Errorf("conversation %q started by box %s, which no longer holds the token it was admitted with: %w", id, cl.box, err))
	case errors.Is(err, store.ErrExists):
		return capability.Refuse(capability.ReasonNotOwn, "Fountain started a conversation whose id the broker has recorded as another box's; the broker did not pass it on.").At(http.StatusBadGateway).WithErr(fmt.Errorf("conversation %q started by box %s is another box's", id, cl.box))
	case err != nil:
		return capability.Refuse(capability.ReasonStore, "Fountain started the conversation, but the broker could not record it as this box's; start another shortly.").WithErr(fmt.Errorf("record conversation of box %s: %w", cl.box, err))
	}
	return nil
}

// conversationID reads the top-level "id" of a JSON answer: a string, or
// a number as written. An id that could not be named as one path segment
// is not usable.
func conversationID(body []byte) (string, bool) {
	var a struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &a) != nil || len(a.ID) == 0 {
		return "", false
	}
	var id string
	switch a.ID[0] {
	case '"':
		if json.Unmarshal(a.ID, &id) != nil {
			return "", false
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		id = string(a.ID)
	default:
		return "", false
	}
	if id == "" || len(id) > 512 || id == "." || id == ".." || strings.Contains(id, "/") || strings.ContainsFunc(id, unsafeRune) {
		return "", false
	}
	return id, true
}

// errorHandler renders a refusal the response step returned, and any
// other failure as the upstream's.
func (c *Capability) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if proxy.LogCut(c.cfg.Logger, err, "fountain", "upstream", "Fountain API") {
		return
	}
	var ce *capability.Error
	if errors.As(err, &ce) {
		if ce.Err != nil {
			c.cfg.Logger.Error("fountain: request failed", "path", token.RedactPath(r.URL.Path), "err", ce.Err)
		}
		proxy.TraceFrom(r.Context()).Refuse(capability.ReasonOf(ce))
		ce.Write(w)
		return
	}
	c.fail(w, r, err)
}
