package fountain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/proxy"
	"github.com/intentius/boxbroker/internal/store"
)

// Bounds on what the broker reads to check ids.
const (
	// MaxChecked bounds a request body read whole to check the ids it
	// names: 1 MiB. A larger JSON or form body is a 413; a larger body of
	// another type is streamed unchecked.
	MaxChecked = 1 << 20
	// MaxListing bounds a listing's answer held to keep only the box's
	// own items: 4 MiB; a larger one is a 502.
	MaxListing = 4 << 20
)

// IDKind returns the kind of Fountain resource a query parameter or JSON
// member named name holds ids of, or "" for none. The name is read in any
// case, as strings.EqualFold (and encoding/json, matching a member to a
// field) folds it ("ſ" is "s"), with "_" and "-" ignored, and names a
// kind when it ends in the kind's word followed by nothing, "s", "es",
// "id" or "ids": sandbox_id, sandboxIds, conversation,
// parent_conversation_id, vaults.
func IDKind(name string) string {
	n := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return foldRune(r)
	}, name)
	for _, suffix := range [...]string{"", "s", "es", "id", "ids"} {
		base, ok := strings.CutSuffix(n, suffix)
		if !ok {
			continue
		}
		for _, f := range Families {
			if strings.HasSuffix(base, f.Kind) { // the kind's name is its word
				return f.Kind
			}
		}
	}
	return ""
}

// foldRune is r as strings.EqualFold matches it: the least rune of its
// case orbit, in lower case ("s" for "S", "s" and "ſ").
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return unicode.ToLower(least)
}

// paramKind returns the kind of Fountain resource a query, form or
// multipart parameter named name holds ids of, or "" for none. Express
// (qs), Rack and PHP read "a[b][c]" as member c of member b of a, and
// "a[]" or "a[0]" as a list a; qs reads "a.b" as member b with its dots
// option. The name is read as bodyIDs reads JSON members: its segments
// (split at "[", "]" and ".") in turn, a numeric one (a list's index)
// keeping the kind before it, any other taking IDKind's, or, when it is
// "id" under a kind's, that kind (an object's id).
func paramKind(name string) string {
	kind := ""
	for _, seg := range strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' || r == '.' }) {
		if strings.Trim(seg, "0123456789") == "" {
			continue
		}
		sub := IDKind(seg)
		if sub == "" && kind != "" && seg == "id" {
			sub = kind
		}
		kind = sub
	}
	return kind
}

// named is one id a request names: its kind, the id, and where.
type named struct {
	kind, id, where string
}

// queryIDs returns the ids q names, in parameters whose names paramKind
// reads as a kind's.
func queryIDs(q url.Values, where string) []named {
	var out []named
	for k, vs := range q {
		kind := paramKind(k)
		if kind == "" {
			continue
		}
		for _, v := range vs {
			if v != "" {
				out = append(out, named{kind, v, fmt.Sprintf("%s (%s)", where, k)})
			}
		}
	}
	return out
}

// bodyIDs returns the ids a JSON body names: under every member, at any
// depth, whose name IDKind reads as a kind's, each string or number, each
// one of an array of them, or the "id" of an object. It reads the body's
// tokens as they come, so a member given twice is checked both times,
// whichever of the two Fountain's parser keeps.
func bodyIDs(body []byte, out []named) ([]named, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	return walkJSON(d, "", "", out)
}

// walkJSON reads one value from d. kind is the kind of id the value holds
// when it is under a member named for one (member), "" otherwise.
func walkJSON(d *json.Decoder, kind, member string, out []named) ([]named, error) {
	t, err := d.Token()
	if err != nil {
		return out, err
	}
	switch t := t.(type) {
	case json.Delim:
		if t == '[' {
			for d.More() {
				if out, err = walkJSON(d, kind, member, out); err != nil {
					return out, err
				}
			}
			_, err = d.Token()
			return out, err
		}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return out, err
			}
			k, _ := kt.(string)
			sub := IDKind(k)
			subMember := k
			if sub == "" && kind != "" && k == "id" {
				sub, subMember = kind, member // the object's id is the id
			}
			if out, err = walkJSON(d, sub, subMember, out); err != nil {
				return out, err
			}
		}
		_, err = d.Token()
		return out, err
	case string, json.Number:
		if kind != "" {
			out = append(out, named{kind, fmt.Sprint(t), fmt.Sprintf("the body (%s)", member)})
		}
	}
	return out, nil
}

// checkRequest returns a refusal unless every id r names in its query
// and its body is the box's that cl admitted (own). It reads a body of
// up to MaxChecked bytes whole to do so, and puts what it read back; it
// returns the body to forward.
func (c *Capability) checkRequest(ctx context.Context, cl *capability.Call, r *http.Request) (io.ReadCloser, error) {
	// A query or form Go's parser does not read whole (a ";" between
	// pairs, a "%" that escapes nothing) is refused: another parser
	// reads it otherwise (Rack splits at ";"), and finds ids in it that
	// were never checked.
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, notWhole("query")
	}
	if err := overrides(r.URL.RawQuery, nil, nil); err != nil {
		return nil, err
	}
	ids := queryIDs(q, "the query")
	body := r.Body
	if body != nil && body != http.NoBody && r.ContentLength != 0 {
		held, err := io.ReadAll(io.LimitReader(body, MaxChecked+1))
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, capability.TooLarge(c.cfg.MaxBody)
		case err != nil:
			return nil, capability.UnreadableBody(fmt.Errorf("read fountain request body: %w", err))
		}
		ct := r.Header.Get("Content-Type") // given once: see overrides
		// A Content-Type that does not parse (mt "") is refused below
		// (overrides) before any id is read, as one PHP may read as
		// multipart.
		mt, params, _ := proxy.BodyType(ct)
		// A body with no Content-Type is read as a form: Rack reads a
		// POST so.
		structured := looksJSON(held) || strings.HasSuffix(mt, "json") || mt == "application/x-www-form-urlencoded" || strings.HasPrefix(mt, "multipart/") || mt == ""
		if int64(len(held)) > MaxChecked {
			if structured {
				return nil, capability.Refuse(capability.ReasonTooLarge,
					"The broker reads a Fountain request body of up to %d bytes to check that the ids it names are this box's; this one is larger.", MaxChecked)
			}
			// Not JSON nor a form: streamed, tokens scrubbed as it goes.
			return proxy.NewTokenScrubber(proxy.PutBack(held, body)), nil
		}
		if err := overrides("", r.Header, held); err != nil {
			return nil, err
		}
		switch {
		case len(held) == 0:
		case mt == "application/x-www-form-urlencoded":
			q, err := url.ParseQuery(string(held))
			if err != nil {
				return nil, notWhole("form body")
			}
			ids = append(ids, queryIDs(q, "the body")...)
		case strings.HasPrefix(mt, "multipart/"):
			// Frameworks read a form's fields from a multipart body as
			// from an urlencoded one (Rack from multipart/mixed and
			// multipart/related too).
			if ids, err = multipartIDs(held, params["boundary"], ids); err != nil {
				return nil, capability.Refuse(capability.ReasonInvalid,
					"The request body is not a multipart form the broker can read, so the broker cannot check that the ids it names are this box's.").WithErr(err)
			}
		case json.Valid(held):
			if ids, err = bodyIDs(held, ids); err != nil {
				return nil, fmt.Errorf("read the ids of a valid JSON body: %w", err)
			}
		case mt == "" && !looksJSON(held):
			// Rack splits such a form at "&" and ";", and refuses a pair
			// with a bad escape, which Go's parser drops: every pair
			// Rack reads is checked.
			q, _ := url.ParseQuery(strings.ReplaceAll(string(held), ";", "&"))
			ids = append(ids, queryIDs(q, "the body")...)
		case structured:
			// Fountain's parser might read what this one refuses, and
			// find ids in it that were never checked.
			return nil, capability.Refuse(capability.ReasonInvalid,
				"The request body is not valid JSON, so the broker cannot check that the ids it names are this box's.")
		}
		proxy.ScrubTokensInPlace(held)
		body = proxy.PutBack(held, body)
	}
	for _, n := range ids {
		if err := c.own(ctx, cl, n.kind, n.id, n.where); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// overrides refuses a request whose query rawQuery or body held (nil
// for none) under the header h names proxy.MethodParam where a host may
// read it (errOverride), or whose body is not one every host reads as
// the broker does (a Content-Type given twice, proxy.ContentType's
// error; proxy.MethodParams' error: a Content-Type that does not parse,
// which PHP may read as multipart, one whose boundary PHP or Rack reads
// as another, or a multipart body that does not read whole), so that
// neither its _method nor its ids are checked.
func overrides(rawQuery string, h http.Header, held []byte) error {
	ct, err := proxy.ContentType(h)
	if err != nil && len(held) > 0 {
		return errUnread(err)
	}
	ms, err := proxy.MethodParams(rawQuery, ct, held)
	if err != nil {
		return errUnread(err)
	}
	if len(ms) > 0 {
		return errOverride
	}
	return nil
}

// errUnread refuses a body not every host reads as the broker does, for
// the reason err (logged, never shown).
func errUnread(err error) error {
	return capability.Refuse(capability.ReasonInvalid,
		"The request body is not one the broker can read as Fountain may (its Content-Type does not parse, is given more than once or names a boundary other parsers read otherwise, or it is a multipart form that does not read to its closing boundary), so the broker cannot check the ids or the method override it may name; send it with one Content-Type such as application/json.").WithErr(err)
}

// errOverride refuses a request naming proxy.MethodParam, where any host
// may read it (proxy.MethodParams): Fountain would act
// on another method than the one the broker judged (a POST taken as the
// GET of a listing, whose answer the broker filters only for a GET). The
// override headers are dropped (proxy.MethodOverrides); a body is not
// rewritten.
var errOverride = capability.Refuse(capability.ReasonInvalid,
	"The request names a method override (_method), which the broker does not carry: send the request with the method itself.")

// notWhole refuses a query or form body (what) Go's parser does not read
// whole.
func notWhole(what string) error {
	return capability.Refuse(capability.ReasonInvalid,
		"The request's %s is not one the broker can read whole (a \";\" between its parameters, or a \"%%\" that escapes nothing), so the broker cannot check that the ids it names are this box's: join parameters with \"&\" and write a \"%%\" itself as %%25.", what)
}

// multipartIDs returns the ids a multipart body with that
// boundary names: the value of every part whose form name paramKind reads
// as a kind's (a file's too), as sent. It reports an error for a body that
// is not such a form, read to its closing boundary.
func multipartIDs(body []byte, boundary string, out []named) ([]named, error) {
	err := proxy.MultipartFields(body, boundary, func(name, value string) {
		if kind := paramKind(name); kind != "" {
			out = append(out, named{kind, value, fmt.Sprintf("the body (%s)", name)})
		}
	})
	return out, err
}

// looksJSON reports whether b begins, after a UTF-8 byte-order mark and
// white space, as a JSON object or array does: a parser that skips the
// mark reads it as JSON.
func looksJSON(b []byte) bool {
	b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// own returns nil when kind/id is recorded as the box's that cl
// admitted, and a 403 otherwise. The owner is read while the box holds
// the token its request was admitted with (cl.TokenHash): a request of a
// box removed, or whose token was replaced, since (or admitted from
// memory not yet told of it) finds no id of the box added under its name
// to be its own, and is refused as one of a removed box (or of a token
// that is no box's: capability.TokenGone). where says where the request
// names it; the message holds the id with any token in it replaced, as
// the audit log keeps it.
func (c *Capability) own(ctx context.Context, cl *capability.Call, kind, id, where string) error {
	box := cl.Box.Name
	owner, err := c.cfg.Resources.ResourceOwnerOfToken(ctx, box, cl.TokenHash, kind, id)
	shown, _ := proxy.ScrubTokens(id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if err := c.tokenGone(ctx, cl.Box, cl.TokenHash); err != nil {
			return err
		}
		how := fmt.Sprintf("the operator assigns one to a box with `boxbroker box assign %s %s %s`", box, kind, shown)
		if kind == store.ResourceConversation {
			how = "a conversation is recorded as a box's when the box starts it through this broker"
		}
		return capability.Refuse(capability.ReasonNotOwn,
			"The %s %s named in %s is not this box's: the broker has no record of it as any box's (%s).", kind, quote(shown), where, how)
	case err != nil:
		return capability.Unavailable(err)
	case owner != box:
		return capability.Refuse(capability.ReasonNotOwn,
			"The %s %s named in %s is not this box's: the broker has it recorded as another box's.", kind, quote(shown), where)
	}
	return nil
}

// errListing is the refusal of a listing the broker cannot filter.
var errListing = capability.Refuse(capability.ReasonUpstream, "Fountain answered a listing the broker could not read to keep only this box's items (it must be JSON of at most the broker's bound), so the broker did not pass it on; ask for each of the box's items by its id.")

// filterListing replaces a 2xx listing's answer with one that holds only
// the box's own items of the family's kind: in every array of the JSON
// answer (at any depth outside a kept item), an element is kept when it
// is a string or number recorded as the box's, or an object whose "id"
// is; every other element is dropped. The answer is held, at most
// MaxListing bytes, and re-encoded.
func (c *Capability) filterListing(resp *http.Response, cl *call) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Request.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	held, err := io.ReadAll(io.LimitReader(resp.Body, MaxListing+1))
	if err != nil {
		return fmt.Errorf("read a listing's answer: %w", err)
	}
	_ = resp.Body.Close()
	if int64(len(held)) > MaxListing {
		return errListing
	}
	d := json.NewDecoder(bytes.NewReader(held))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return errListing
	}
	// Read while the box holds the token it was admitted with, as own
	// reads.
	ctx := resp.Request.Context()
	recs, err := c.cfg.Resources.ListResourcesOfToken(ctx, cl.box, cl.tokenHash)
	if err != nil {
		return capability.Unavailable(err)
	}
	if len(recs) == 0 {
		// None, perhaps because the box no longer holds the token: its
		// listing is then refused as every other request of it is.
		if err := c.tokenGone(ctx, cl.admitted, cl.tokenHash); err != nil {
			return err
		}
	}
	mine := make(map[string]bool, len(recs))
	for _, rec := range recs {
		if rec.Kind == cl.listing {
			mine[rec.ID] = true
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(keepOwn(v, mine)); err != nil {
		return fmt.Errorf("encode a filtered listing: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // the Encoder's newline
	resp.Body = io.NopCloser(&buf)
	resp.ContentLength = int64(buf.Len())
	resp.Header.Set("Content-Length", fmt.Sprint(buf.Len()))
	resp.Header.Set("Content-Type", "application/json")
	return nil
}

func keepOwn(v any, mine map[string]bool) any {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			v[k] = keepOwn(m, mine)
		}
		return v
	case []any:
		kept := make([]any, 0, len(v))
		for _, m := range v {
			if isMine(m, mine) {
				kept = append(kept, m)
			}
		}
		return kept
	}
	return v
}

func isMine(v any, mine map[string]bool) bool {
	switch v := v.(type) {
	case string:
		return mine[v]
	case json.Number:
		return mine[v.String()]
	case map[string]any:
		id, ok := v["id"]
		if !ok {
			return false
		}
		switch id.(type) {
		case string, json.Number:
			return isMine(id, mine)
		}
	}
	return false
}

// tokenGone returns capability.TokenGone when admitted, the box as a
// request was admitted with the token that hashes to tokenHash, no
// longer holds that token (removed, or its token replaced), which is why
// an id was not found as its own (or a listing kept none); nil when it
// still does, and capability.Unavailable when the store does not answer.
func (c *Capability) tokenGone(ctx context.Context, admitted store.Box, tokenHash string) error {
	now, err := c.cfg.Resources.Box(ctx, admitted.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return capability.Unavailable(err)
	}
	if err == nil && now.CreatedAt.Equal(admitted.CreatedAt) && (now.TokenHash == tokenHash || now.OldTokenHash == tokenHash) {
		return nil
	}
	return capability.TokenGone(ctx, c.cfg.Resources, admitted)
}
