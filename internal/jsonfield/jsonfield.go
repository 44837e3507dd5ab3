// Package jsonfield reads a few members out of a JSON document as
// encoding/json would read them into a struct, but matching names
// exactly: json.Valid checks the document (Parse), or the caller has no
// need of a check (View), and github.com/tidwall/gjson walks its members without decoding the values that are not read (most
// of a Messages request, say). Each value read is decoded as encoding/json
// decodes it, so a caller can give encoding/json's answer for the members
// it reads, and still tell a name that matches only case-insensitively
// (which encoding/json would also read) from one that matches exactly.
package jsonfield

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Parse returns doc's top-level value, and false when doc is not valid
// JSON as json.Valid checks it. The value holds a copy of doc, so doc
// may be reused once Parse returns.
func Parse(doc []byte) (gjson.Result, bool) {
	if !json.Valid(doc) {
		return gjson.Result{}, false
	}
	return gjson.ParseBytes(doc), true
}

// View returns doc's top-level value without checking that doc is valid
// JSON, and without copying it: the value, and every member read from it
// by gjson, is a view of doc, which must not change while they are in
// use (String and Int copy what they read). It is for a caller to whom
// what an invalid document reads as does not matter, because whoever
// receives the document refuses it: a walk through an invalid document
// stops early or reads nonsense, never past doc's end.
func View(doc []byte) gjson.Result {
	if len(doc) == 0 {
		return gjson.Result{}
	}
	return gjson.Parse(unsafe.String(&doc[0], len(doc)))
}

// Name is the name k, a member's key from ForEach over a value Parse
// returned, stands for, as encoding/json reads it.
func Name(k gjson.Result) string {
	if strings.IndexByte(k.Raw, '\\') < 0 {
		return k.Raw[1 : len(k.Raw)-1]
	}
	var s string
	_ = json.Unmarshal([]byte(k.Raw), &s)
	return s
}

// Fold reports whether name equals want only case-insensitively, as
// encoding/json matches a member's name to a field's when none matches
// exactly.
func Fold(name, want string) bool {
	return name != want && strings.EqualFold(name, want)
}

// String reads v into *s as encoding/json reads a value into a string:
// null leaves *s as it was. It reports false for a value of any other
// kind. The string is a copy, holding nothing of the document.
func String(v gjson.Result, s *string) bool {
	switch v.Type {
	case gjson.Null:
		return true
	case gjson.String:
		raw := v.Raw[1 : len(v.Raw)-1]
		if strings.IndexByte(raw, '\\') < 0 && utf8.ValidString(raw) {
			*s = strings.Clone(raw)
			return true
		}
		return json.Unmarshal([]byte(v.Raw), s) == nil
	}
	return false
}

// Int reads v into *n as encoding/json reads a value into an *int64:
// null empties it (*set false). It reports false for a value of any
// other kind, and for a number that is not an int64 (a fraction, an
// exponent, out of range).
func Int(v gjson.Result, n *int64, set *bool) bool {
	switch v.Type {
	case gjson.Null:
		*n, *set = 0, false
		return true
	case gjson.Number:
		i, err := strconv.ParseInt(v.Raw, 10, 64) // as encoding/json reads an int64
		if err != nil {
			return false
		}
		*n, *set = i, true
		return true
	}
	return false
}

// Object reports whether v is an object, and false for null. ok is false
// for a value of any other kind, which encoding/json refuses for a
// pointer to a struct.
func Object(v gjson.Result) (object, ok bool) {
	switch {
	case v.Type == gjson.Null:
		return false, true
	case v.IsObject():
		return true, true
	}
	return false, false
}
