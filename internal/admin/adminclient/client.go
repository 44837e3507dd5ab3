// Package adminclient calls a broker's admin API over HTTP, for the
// CLI's remote commands (`boxbroker --admin-url`). It is not the box's
// client: that is the top-level client package.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/cloud"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/quiet"
	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// maxAnswer bounds an admin API answer the client reads.
const maxAnswer = 16 << 20

// maxMessage bounds what an APIError keeps of a refusal's message: the
// admin API's are a sentence or two, and an admin URL that is not the
// broker's could answer one of up to maxAnswer for the CLI to print.
const maxMessage = 1 << 10

// refusal is the APIError of a non-2xx answer with status and body b:
// its type and message as protocol.ReadRefusal reads them, the message
// cut to maxMessage bytes (quiet.Cut), or the status's text when b
// holds no message.
func refusal(status int, b []byte) *APIError {
	typ, msg := protocol.ReadRefusal(b)
	if msg == "" {
		return &APIError{Status: status, Message: http.StatusText(status)}
	}
	return &APIError{Status: status, Type: typ, Message: quiet.Cut(msg, maxMessage)}
}

// Client calls a broker's admin API, for `boxbroker --admin-url`. Its
// methods are safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a Client for the admin API at baseURL, authenticating
// with token. It refuses a URL that would carry the token in the clear
// off this machine: plain http is allowed only to a loopback address.
// httpClient nil means a client with a 30 s timeout.
func New(baseURL, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the admin URL must be an http(s) URL with a host and no credentials, query or fragment, such as http://127.0.0.1:8788")
	}
	if quiet.InClear(u) {
		return nil, fmt.Errorf("the admin URL %s is plain http to another machine, which would send the admin token in the clear; use https", u.Redacted())
	}
	if token == "" {
		return nil, errors.New("no admin token: set BOXBROKER_ADMIN_TOKEN (`boxbroker admin token` on the broker's machine makes one)")
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	hc := *httpClient
	// A redirect could carry the token elsewhere; the admin API never redirects.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc.Transport = quiet.Errors(hc.Transport) // an error never quotes the token
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: token, http: &hc}, nil
}

// APIError is a refusal from the admin API: its status, type and message.
type APIError struct {
	Status  int
	Type    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("the broker answered %d: %s", e.Status, e.Message)
}

// Unwrap returns the refusal as the operator service makes it: the code
// its status answers (admin.CodeOf; none for a status no refusal has)
// with its message, so that operator.CodeOf says the same of an action
// through the admin API as of one on the store.
func (e *APIError) Unwrap() error {
	code := admin.CodeOf(e.Status)
	if code == 0 {
		return nil
	}
	return &operator.Error{Code: code, Message: e.Message}
}

// do sends method path with in as a JSON body (none when nil) and decodes
// the answer into out (ignored when nil). A non-2xx answer is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	// path is escaped (its segments through url.PathEscape), so that a
	// principal holding a slash stays one segment.
	p, rawQuery, _ := strings.Cut(path, "?")
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return fmt.Errorf("admin request: path %q: %w", p, err)
	}
	u.RawPath = c.base.EscapedPath() + p
	u.Path += unescaped
	u.RawQuery = rawQuery
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("admin request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if len(rb) > maxAnswer {
		return fmt.Errorf("%s %s: the answer is over %d bytes", method, path, maxAnswer)
	}
	if repeats(rb, c.token) {
		// The admin API never writes an admin token: this is not the
		// broker's answer, and whatever of it the CLI printed (a
		// refusal's message, a listing's names) could carry the token
		// to a terminal's scrollback or a CI job's log.
		return fmt.Errorf("%s %s: the answer (%d) repeats the admin token it was sent, so none of it is shown; is %s the broker's admin URL?",
			method, path, resp.StatusCode, c.base.Redacted())
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return refusal(resp.StatusCode, rb)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// repeats reports whether the answer b holds tok: in its bytes, or,
// read as JSON, in any string (a member's name or a value) as it
// decodes, escaped however the writer chose (\u0062ba_…).
func repeats(b []byte, tok string) bool {
	if bytes.Contains(b, []byte(tok)) {
		return true
	}
	if !bytes.Contains(b, []byte{'\\'}) {
		return false // no escape: the bytes are what decodes
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := t.(string); ok && strings.Contains(s, tok) {
			return true
		}
	}
}

// call is do for a route that answers a T: it sends method path with in
// as a JSON body (none when nil) and returns the answer decoded.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.do(ctx, method, path, in, &out)
	return out, err
}

// BoxPage returns one page of boxes, by name: at most limit (1 to
// 1000) of them after the cursor after ("" for the first page), and the
// cursor of the next page ("" after the last).
func (c *Client) BoxPage(ctx context.Context, limit int, after string) ([]operator.BoxView, string, error) {
	out, err := call[admin.BoxList](ctx, c, http.MethodGet, "/api/boxes"+query("limit", strconv.Itoa(limit), "after", after), nil)
	return out.Boxes, out.Next, err
}

// EachBox calls fn with every box, by name, reading them limit at a
// time, so that its memory does not grow with the fleet; it stops at
// fn's first error and returns it, and at an answer whose next page
// starts where it did or that holds no box (one a broker never gives,
// which would have it ask again forever).
func (c *Client) EachBox(ctx context.Context, limit int, fn func(operator.BoxView) error) error {
	after := ""
	for {
		boxes, next, err := c.BoxPage(ctx, limit, after)
		if err != nil {
			return err
		}
		for _, b := range boxes {
			if err := fn(b); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		if next == after || len(boxes) == 0 {
			// A broker's next page starts past the boxes of this one; an
			// answer that does not move on would be asked again forever.
			return fmt.Errorf("GET /api/boxes: the answer names a next page but does not move past this one; is %s the broker's admin URL?", c.base.Redacted())
		}
		after = next
	}
}

// Box returns one box.
func (c *Client) Box(ctx context.Context, name string) (operator.BoxView, error) {
	return call[operator.BoxView](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(name), nil)
}

// AddBox enrols a box and returns it with its token, shown this once.
func (c *Client) AddBox(ctx context.Context, nb operator.NewBox) (operator.BoxToken, error) {
	bt, err := call[operator.BoxToken](ctx, c, http.MethodPost, "/api/boxes", nb)
	if err := c.shaped(err, bt.Token, token.BoxPrefix, "POST /api/boxes"); err != nil {
		return operator.BoxToken{}, err
	}
	return bt, nil
}

// UpdateBox changes a box's consent or paused setting.
func (c *Client) UpdateBox(ctx context.Context, name string, set operator.BoxSettings) (operator.BoxView, error) {
	return call[operator.BoxView](ctx, c, http.MethodPatch, "/api/boxes/"+url.PathEscape(name), set)
}

// RemoveBox removes a box and everything kept for it.
func (c *Client) RemoveBox(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(name), nil, nil)
}

// RotateBoxWith replaces a box's token as tr says (a grace for the old
// one, a TTL for the box's tokens) and returns the new one, shown this
// once.
func (c *Client) RotateBoxWith(ctx context.Context, name string, tr operator.TokenRotation) (operator.BoxToken, error) {
	bt, err := call[operator.BoxToken](ctx, c, http.MethodPost, "/api/boxes/"+url.PathEscape(name)+"/token", tr)
	if err := c.shaped(err, bt.Token, token.BoxPrefix, "POST /api/boxes/{name}/token"); err != nil {
		return operator.BoxToken{}, err
	}
	return bt, nil
}

// ListCredentials returns every credential's ID and when it was set.
func (c *Client) ListCredentials(ctx context.Context) ([]operator.CredentialView, error) {
	out, err := call[admin.CredentialList](ctx, c, http.MethodGet, "/api/credentials", nil)
	return out.Credentials, err
}

// wireKind is a credential's kind as a request body says it: anthropic
// is said by no kind at all, so that the body is the one a broker from
// before kinds takes.
func wireKind(kind string) string {
	if kind == cloud.KindAnthropic {
		return ""
	}
	return kind
}

// SetCredential sets the credential id to value, of kind: "" or
// anthropic for an Anthropic key or setup token (or the fountain key),
// bedrock or vertex for a cloud account's JSON, which the broker checks.
// The value goes in the request's body only.
func (c *Client) SetCredential(ctx context.Context, id, kind string, value []byte) (operator.CredentialView, error) {
	return call[operator.CredentialView](ctx, c, http.MethodPut, "/api/credentials/"+url.PathEscape(id), admin.CredentialValue{Value: string(value), Kind: wireKind(kind)})
}

// RemoveCredential removes the credential id.
func (c *Client) RemoveCredential(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/credentials/"+url.PathEscape(id), nil, nil)
}

// PoolEntries lists the credential pool's entries, with the answering
// replica's state and counts.
func (c *Client) PoolEntries(ctx context.Context) ([]operator.PoolEntryView, error) {
	out, err := call[operator.PoolList](ctx, c, http.MethodGet, "/api/credentials/pool", nil)
	return out.Entries, err
}

// SetPoolEntry sets the pool entry name to value, of kind (as
// SetCredential's).
func (c *Client) SetPoolEntry(ctx context.Context, name, kind string, weight int, baseURL string, value []byte) (operator.PoolEntryView, error) {
	return call[operator.PoolEntryView](ctx, c, http.MethodPut, "/api/credentials/pool/"+url.PathEscape(name), operator.PoolEntryValue{Value: string(value), Weight: weight, URL: baseURL, Kind: wireKind(kind)})
}

// RemovePoolEntry removes the pool entry name.
func (c *Client) RemovePoolEntry(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/credentials/pool/"+url.PathEscape(name), nil, nil)
}

// ListAudit lists the audit log entries q selects, newest first; the
// admin API gives at most admin.MaxAuditList (q.Limit 0: admin.DefaultAuditList).
func (c *Client) ListAudit(ctx context.Context, q store.AuditQuery) ([]operator.AuditView, error) {
	limit, since := "", ""
	if q.Limit > 0 {
		limit = strconv.Itoa(q.Limit)
	}
	if !q.Since.IsZero() {
		since = q.Since.UTC().Format(time.RFC3339)
	}
	path := "/api/audit" + query("box", q.Box, "since", since, "refusals", strconv.FormatBool(q.RefusalsOnly), "limit", limit)
	out, err := call[admin.AuditList](ctx, c, http.MethodGet, path, nil)
	return out.Entries, err
}

// SetPayer sets who pays for a box's model calls and returns the box and
// whether an owner's credential was removed. For an owner, set.Value is
// the owner's credential, of set.CredentialKind; the caller clears its
// own copy.
func (c *Client) SetPayer(ctx context.Context, name string, set operator.PayerSetting) (operator.PayerView, error) {
	set.CredentialKind = wireKind(set.CredentialKind)
	return call[operator.PayerView](ctx, c, http.MethodPut, "/api/boxes/"+url.PathEscape(name)+"/payer", set)
}

// ListVisitors returns the visitors holding a credential, never a value.
func (c *Client) ListVisitors(ctx context.Context) ([]operator.VisitorView, error) {
	out, err := call[operator.VisitorList](ctx, c, http.MethodGet, "/api/visitors", nil)
	return out.Visitors, err
}

// SetVisitor sets a visitor's Anthropic credential to value, of kind (as
// SetCredential's).
func (c *Client) SetVisitor(ctx context.Context, principal, kind string, value []byte) (operator.VisitorView, error) {
	return call[operator.VisitorView](ctx, c, http.MethodPut, "/api/visitors/"+url.PathEscape(principal), admin.CredentialValue{Value: string(value), Kind: wireKind(kind)})
}

// RemoveVisitor removes a visitor's credential.
func (c *Client) RemoveVisitor(ctx context.Context, principal string) error {
	return c.do(ctx, http.MethodDelete, "/api/visitors/"+url.PathEscape(principal), nil, nil)
}

// IssueGrant issues a grant on box and returns it with its value, shown
// this once.
func (c *Client) IssueGrant(ctx context.Context, box string, ng operator.NewGrant) (operator.IssuedGrant, error) {
	ig, err := call[operator.IssuedGrant](ctx, c, http.MethodPost, "/api/boxes/"+url.PathEscape(box)+"/grants", ng)
	if err := c.shaped(err, ig.Value, token.GrantPrefix, "POST /api/boxes/{name}/grants"); err != nil {
		return operator.IssuedGrant{}, err
	}
	return ig, nil
}

// shaped is err, or, when there is none, an error unless tok (the token
// or grant an answer to route holds, which the CLI prints for the
// operator to hand on) is one whole token of prefix's shape: an answer
// with none, or with other text where it goes (a terminal's escapes), is
// not the broker's, and says nothing was made.
func (c *Client) shaped(err error, tok, prefix, route string) error {
	if err != nil {
		return err
	}
	if found := token.AppendFound(nil, tok, prefix); len(found) != 1 || found[0] != tok || len(tok) != len(prefix)+token.BodyLen {
		return fmt.Errorf("%s: the answer holds no %s… token where the broker writes one, so none is shown; is %s the broker's admin URL?", route, prefix, c.base.Redacted())
	}
	return nil
}

// ListGrants returns a box's grants, newest first, never their values.
func (c *Client) ListGrants(ctx context.Context, box string) ([]operator.GrantView, error) {
	out, err := call[operator.GrantList](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/grants", nil)
	return out.Grants, err
}

// RevokeGrant revokes the grant with that ID.
func (c *Client) RevokeGrant(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/grants/"+url.PathEscape(id), nil, nil)
}

// Budgets returns a box's budgets and where they stand in month
// (YYYY-MM; "" for this month).
func (c *Client) Budgets(ctx context.Context, box, month string) (operator.BudgetList, error) {
	return call[operator.BudgetList](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/budgets"+query("month", month), nil)
}

// SetBudget sets a box's budget (set.Principal nil for its own).
func (c *Client) SetBudget(ctx context.Context, box string, set operator.BudgetSetting) (operator.BudgetView, error) {
	return call[operator.BudgetView](ctx, c, http.MethodPut, "/api/boxes/"+url.PathEscape(box)+"/budgets", set)
}

// RemoveBudget removes a box's budget: its own when principal is "".
func (c *Client) RemoveBudget(ctx context.Context, box, principal string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/budgets"+query("principal", principal), nil, nil)
}

// Spend returns a box's spend in month (YYYY-MM; "" for this month),
// measured beside reported.
func (c *Client) Spend(ctx context.Context, box, month string) (operator.SpendReport, error) {
	return call[operator.SpendReport](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/spend"+query("month", month), nil)
}

// query is "?name=value&…" of pairs (a name, then its value, …),
// escaped, leaving out each empty value; "" when all are empty.
func query(pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			v.Set(pairs[i], pairs[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// ListDeadLetters lists the batches of records the store refused for
// good on the replica the client talks to, oldest first.
func (c *Client) ListDeadLetters(ctx context.Context) ([]operator.DeadLetterView, error) {
	out, err := call[operator.DeadLetterList](ctx, c, http.MethodGet, "/api/spool/dead", nil)
	return out.DeadLetters, err
}

// RetryDeadLetter applies the dead letter id (or the one its prefix
// names) to the store now; it is removed once the store takes it.
func (c *Client) RetryDeadLetter(ctx context.Context, id string) (operator.DeadLetterView, error) {
	return call[operator.DeadLetterView](ctx, c, http.MethodPost, "/api/spool/dead/"+url.PathEscape(id)+"/retry", nil)
}

// DropDeadLetter removes the dead letter id, giving up its records.
func (c *Client) DropDeadLetter(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/spool/dead/"+url.PathEscape(id), nil, nil)
}

// ListResources lists the Fountain ids assigned to a box.
func (c *Client) ListResources(ctx context.Context, box string) ([]operator.ResourceView, error) {
	out, err := call[operator.ResourceList](ctx, c, http.MethodGet, "/api/boxes/"+url.PathEscape(box)+"/resources", nil)
	return out.Resources, err
}

// AddResource assigns a Fountain id to a box.
func (c *Client) AddResource(ctx context.Context, box string, nr operator.NewResource) (operator.ResourceView, error) {
	return call[operator.ResourceView](ctx, c, http.MethodPost, "/api/boxes/"+url.PathEscape(box)+"/resources", nr)
}

// RemoveResource unassigns a box's Fountain id.
func (c *Client) RemoveResource(ctx context.Context, box, kind, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/boxes/"+url.PathEscape(box)+"/resources/"+url.PathEscape(kind)+"/"+url.PathEscape(id), nil, nil)
}

var _ operator.Actions = (*Client)(nil)
