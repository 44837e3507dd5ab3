package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// MethodParam is the parameter with which Rails (Rack::MethodOverride),
// Laravel and Symfony, Spring, Express's method-override, Phoenix and
// ASP.NET Core take a POST as the method it names: in the query, a
// form's fields, a multipart part, or a JSON body's top level.
const MethodParam = "_method"

// MethodParams returns the value of every parameter a host may read as
// MethodParam in a request with the query rawQuery and the body body
// (nil for none) of Content-Type contentType, as written (a JSON
// member's value that is not a string as its JSON text):
//
//   - in the query, and in a form body (application/x-www-form-urlencoded,
//     or a body with no Content-Type, which Rack reads as a form), each
//     pair split at "&" and again at "&" and ";" (as Rack splits), whose
//     name is MethodParam as PHP registers it (MethodName);
//   - in a multipart body (any multipart/ type: Rack reads
//     multipart/mixed and multipart/related as forms too), each part
//     whose form name is, or any name Rack or PHP may read it under
//     (MultipartFields), read to its closing boundary;
//   - in a body that is JSON (whatever its Content-Type, a form's too),
//     each top-level member named MethodParam, as often as it is given.
//
// It reports an error for a multipart body it cannot read whole, and
// for a body whose Content-Type Go's parser does not read (such as
// "multipart/form-data x; boundary=b", which PHP reads as multipart),
// having read it as a form and as JSON.
func MethodParams(rawQuery, contentType string, body []byte) ([]string, error) {
	out := formMethods(rawQuery, nil)
	if len(body) == 0 {
		return out, nil
	}
	mt, params, err := BodyType(contentType)
	if strings.HasPrefix(mt, "multipart/") {
		return multipartMethods(body, params["boundary"], out)
	}
	if mt == "application/x-www-form-urlencoded" || mt == "" {
		out = formMethods(string(body), out)
	}
	if json.Valid(body) { // a form may be valid JSON too: "a&_method=PUT&b"
		out = jsonMethods(body, out)
	}
	return out, err
}

// ContentType returns the Content-Type h gives a request's body. It
// reports an error when h gives more than one: Go's server and Node read
// the first, Apache and Puma join them with ", " (PHP then reading the
// first boundary, Rack the last), so no one reading is every host's.
func ContentType(h http.Header) (string, error) {
	vs := h.Values("Content-Type")
	if len(vs) > 1 {
		return vs[0], errors.New("a Content-Type given more than once")
	}
	return h.Get("Content-Type"), nil
}

// BodyType returns the media type (lower case; "" for none) and the
// parameters of a body sent under the Content-Type contentType, as Go's
// parser reads them: what every check that reads a request body by its
// type (MethodParams, Fountain's ids) reads it as. It reports an error
// for a Content-Type Go's parser does not read ("multipart/form-data x;
// boundary=b", a parameter named twice): PHP cuts the type at " ", ","
// or ";", Rack at "," or ";", and reads such a body as multipart or as
// a form, so a check that reads the body must refuse it rather than
// read it otherwise. So is a multipart type whose boundary PHP or Rack
// reads as another than Go's parser does (otherBoundary): a body may
// hold parts under both, each reader seeing only its own. A type whose
// parameters do not parse is returned with none (a multipart body under
// it has no boundary).
func BodyType(contentType string) (string, map[string]string, error) {
	if contentType == "" {
		return "", nil, nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if mt == "" {
		return "", nil, fmt.Errorf("a Content-Type that does not parse: %w", err)
	}
	if b, ok := params["boundary"]; ok && strings.HasPrefix(mt, "multipart/") && otherBoundary(contentType, b) {
		return "", nil, errors.New("a multipart boundary another parser reads otherwise")
	}
	return mt, params, nil
}

// otherBoundary reports whether PHP or Rack reads a boundary other than
// b in the multipart Content-Type ct. PHP takes the first "boundary" in
// ct (in any case only when none is in lower case), anywhere, then what
// follows the next "=": up to the closing quote, or else up to a "," or
// ";". Rack takes the last "boundary=" (in any case) followed by a
// value, after a quote, up to a quote, "," or ";".
func otherBoundary(ct, b string) bool {
	lower := asciiLower(ct) // as both read a case: the same length
	i := strings.Index(ct, "boundary")
	if i < 0 {
		i = strings.Index(lower, "boundary")
	}
	if i < 0 { // Go's parser reads no name but in ASCII: never so
		return true
	}
	if eq := strings.IndexByte(ct[i:], '='); eq >= 0 {
		v := ct[i+eq+1:]
		if q, ok := strings.CutPrefix(v, `"`); ok {
			v, _, _ = strings.Cut(q, `"`)
		} else if n := strings.IndexAny(v, ",;"); n >= 0 {
			v = v[:n]
		}
		if v != b {
			return true
		}
	}
	for end := len(lower); ; {
		j := strings.LastIndex(lower[:end], "boundary=")
		if j < 0 {
			return false
		}
		v := strings.TrimPrefix(ct[j+len("boundary="):], `"`)
		if n := strings.IndexAny(v, `";,`); n >= 0 {
			v = v[:n]
		}
		if v != "" {
			return v != b
		}
		end = j
	}
}

// asciiLower is s with every ASCII upper-case letter in lower case, and
// every other byte as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// MethodParamBody reports whether a host may read MethodParam from a
// body of Content-Type contentType: a form (urlencoded or multipart), no
// Content-Type (Rack reads a POST's body as a form), a Content-Type that
// does not parse, or JSON. Laravel reads a body as JSON when its
// Content-Type holds "/json" or "+json" anywhere, its parameters too
// ("text/plain; x=/json"), so such a type is JSON here, in any case.
// Any other body (a file: application/octet-stream, image/png) no host
// reads MethodParam from.
func MethodParamBody(contentType string) bool {
	mt, _, _ := BodyType(contentType)
	lower := asciiLower(contentType)
	return mt == "" || mt == "application/x-www-form-urlencoded" || strings.HasPrefix(mt, "multipart/") ||
		strings.Contains(lower, "/json") || strings.Contains(lower, "+json")
}

// MethodName reports whether a host may read a query's or form's
// parameter named name as MethodParam: name itself, or name as PHP
// registers it (its leading spaces dropped, cut at a NUL, since PHP
// reads the decoded name as a C string, and at a "[", every "." and " "
// made "_"), so that Laravel and Symfony read ".method" and
// "_method%00x" as _method.
func MethodName(name string) bool {
	if name == MethodParam {
		return true
	}
	name, _, _ = strings.Cut(strings.TrimLeft(name, " "), "\x00")
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' {
			return '_'
		}
		return r
	}, name) == MethodParam
}

// formMethods adds to out the values of the pairs of form (a query or
// a form body) that MethodName reads as MethodParam, split at "&", and
// again at "&" and ";". A pair Go's parser does not decode is left out:
// Rack refuses it, and no other host reads a method in it.
func formMethods(form string, out []string) []string {
	for _, f := range []string{form, strings.ReplaceAll(form, ";", "&")} {
		q, _ := url.ParseQuery(f)
		for k, vs := range q {
			if MethodName(k) {
				out = append(out, vs...)
			}
		}
		if !strings.Contains(form, ";") {
			break
		}
	}
	return out
}

// multipartMethods adds to out the value of every part of body, a
// multipart body with that boundary, under a name (MultipartFields)
// MethodName reads as MethodParam.
func multipartMethods(body []byte, boundary string, out []string) ([]string, error) {
	err := MultipartFields(body, boundary, func(name, value string) {
		if MethodName(name) {
			out = append(out, value)
		}
	})
	return out, err
}

// partNames returns every name a host's multipart parser may read a
// part with header h under, beyond the form name Go's parser reads:
//
//   - Rack reads a part with no Content-Disposition name (Rack 3.1: also
//     one whose Content-Disposition is over 1536 bytes) under its
//     Content-ID, and Rack 2 finds "Content-ID:" anywhere in the head;
//   - Rack 2 and 3.0 read the name by a pattern (" name=" or "; name=",
//     in any case, up to a quote or ";"), which matches inside another
//     parameter's quoted value (x="; name=_method") and, in Rack 2, in
//     any header line after "Content-Disposition:";
//   - PHP reads a name quoted in single quotes (name='_method'), or up to
//     a space.
//
// So every header value is searched for "content-id:" and for "name"
// after a space, ";" or quote and followed by "=", and each value after
// it is taken as each of them reads it.
func partNames(h textproto.MIMEHeader) []string {
	names := slices.Clone(h.Values("Content-Id"))
	for _, vs := range h {
		for _, v := range vs {
			lower := asciiLower(v)
			if i := strings.Index(lower, "content-id:"); i >= 0 {
				names = append(names, strings.TrimSpace(v[i+len("content-id:"):]))
			}
			for i := strings.Index(lower, "name"); i >= 0; {
				if i == 0 || strings.IndexByte(" \t;\"'", lower[i-1]) >= 0 {
					if rest, ok := strings.CutPrefix(strings.TrimLeft(v[i+len("name"):], " \t"), "="); ok {
						names = append(names, paramValues(strings.TrimLeft(rest, " \t"))...)
					}
				}
				j := strings.Index(lower[i+1:], "name")
				if j < 0 {
					break
				}
				i += 1 + j
			}
		}
	}
	return names
}

// paramValues returns the values a parameter's value written as v (what
// follows its "=") is read as: up to a quote or ";", a leading double
// quote dropped (Rack 2 and 3.0); within the quotes it opens with, or up
// to a space (PHP).
func paramValues(v string) []string {
	rack := strings.TrimPrefix(v, `"`)
	if i := strings.IndexAny(rack, `";`); i >= 0 {
		rack = rack[:i]
	}
	php := v
	if q := v[:min(1, len(v))]; q == `"` || q == "'" {
		php, _, _ = strings.Cut(v[1:], q)
	} else if i := strings.IndexAny(v, " \t"); i >= 0 {
		php = v[:i]
	}
	return []string{rack, php}
}

// MultipartFields calls f with each name a host may read a part of
// body under (the Content-Disposition's name parameter, "" when it has
// none, and each partNames finds), once, and the value, as sent, of
// every part of body, a multipart body with that boundary. It reports
// an error for a body that is not such a form, read to its closing
// boundary, or with a Content-Disposition Go's parser does not read.
func MultipartFields(body []byte, boundary string, f func(name, value string)) error {
	return multipartParts(body, boundary, func(h textproto.MIMEHeader, names []string, value string) {
		names = append(names, partNames(h)...)
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			f(name, value)
		}
	})
}

// multipartParts calls f with the header, the form names (one for each
// Content-Disposition, "" for one with no name) and the value, as sent,
// of every part of body, a multipart body with that boundary. It reports
// an error for a body that is not such a form, read to its closing
// boundary, or with a Content-Disposition Go's parser does not read.
func multipartParts(body []byte, boundary string, f func(h textproto.MIMEHeader, names []string, value string)) error {
	if boundary == "" {
		return errors.New("multipart body with no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		v, err := io.ReadAll(p)
		if err != nil {
			return err
		}
		var names []string
		for _, cd := range p.Header.Values("Content-Disposition") {
			_, params, err := mime.ParseMediaType(cd)
			if err != nil {
				return err
			}
			names = append(names, params["name"])
		}
		f(p.Header, names, string(v))
	}
}

// jsonMethods adds to out the value of every top-level member of body,
// valid JSON, named MethodParam: a string's value, any other its JSON
// text. It reads the members as they come, so a member given twice is
// found both times, whichever a host's parser keeps.
func jsonMethods(body []byte, out []string) []string {
	d := json.NewDecoder(bytes.NewReader(body))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return out
	}
	for d.More() {
		kt, err := d.Token()
		if err != nil {
			return out
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return out
		}
		if k, _ := kt.(string); k == MethodParam {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out = append(out, s)
			} else {
				out = append(out, string(v))
			}
		}
	}
	return out
}
