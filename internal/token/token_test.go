package token_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/store"
	"github.com/intentius/boxbroker/internal/token"
)

// TestHash_StoredFormIsStable pins each kind's stored form: the SHA-256
// of the whole token, prefix included, in lower-case hex. Every store
// already written holds hashes in this form; a change that breaks one of
// these vectors locks out every box, admin and grant issued before it.
func TestHash_StoredFormIsStable(t *testing.T) {
	const random = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8" // bytes 0..31, base64url
	tests := []struct {
		kind, token, hash string
	}{
		{"box", "bbx_" + random, "b50eaf2b605e5cb128337ef3a56fb3294617226d108595ea7dc1610dde938aac"},
		{"admin", "bba_" + random, "fe40ca54786a22e1f3d38c314ab366d6c1a9d1515f5a53764c650607eee9e84c"},
		{"grant", "bbg_" + random, "300e461bebcced228f5bb31767856ad5e5879c5166a551b753ad2f7352be261d"},
		{"empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			if got := token.Hash(tt.token); got != tt.hash {
				t.Errorf("Hash(%q) = %q, want %q", tt.token, got, tt.hash)
			}
			if got := token.ShortHash(tt.token); got != tt.hash[:12] {
				t.Errorf("ShortHash(%q) = %q, want %q", tt.token, got, tt.hash[:12])
			}
		})
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		kind   string
		prefix string
		mint   func() (string, error)
	}{
		{"box", "bbx_", token.NewBox},
		{"admin", "bba_", token.NewAdmin},
		{"grant", "bbg_", token.NewGrant},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			a, err := tt.mint()
			if err != nil {
				t.Fatal(err)
			}
			b, err := tt.mint()
			if err != nil {
				t.Fatal(err)
			}
			if a == b {
				t.Errorf("two %s tokens are both %q", tt.kind, a)
			}
			rest, ok := strings.CutPrefix(a, tt.prefix)
			if !ok || len(rest) != 43 {
				t.Fatalf("%s token = %q, want %s and 43 base64url characters", tt.kind, a, tt.prefix)
			}
			if raw, err := base64.RawURLEncoding.DecodeString(rest); err != nil || len(raw) != 32 {
				t.Errorf("%s token %q holds %d bytes, %v; want 32 random bytes, base64url", tt.kind, a, len(raw), err)
			}
			if h := token.Hash(a); h == a || len(h) != 64 {
				t.Errorf("Hash(%q) = %q, want 64 hex digits", a, h)
			}
		})
	}
	if token.BoxPrefix != "bbx_" || token.AdminPrefix != "bba_" || token.GrantPrefix != "bbg_" {
		t.Errorf("prefixes = %q %q %q, want bbx_ bba_ bbg_", token.BoxPrefix, token.AdminPrefix, token.GrantPrefix)
	}
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestFromRequest(t *testing.T) {
	tests := []struct {
		name    string
		header  http.Header
		want    string
		wantErr error
	}{
		{"none", header(), "", token.ErrMissing},
		{"bearer", header("Authorization", "Bearer bbx_a"), "bbx_a", nil},
		{"bearer in lower case", header("Authorization", "bearer bbx_a"), "bbx_a", nil},
		{"bearer in upper case", header("Authorization", "BEARER bbx_a"), "bbx_a", nil},
		{"bearer trimmed", header("Authorization", "Bearer  \tbbx_a \t"), "bbx_a", nil},
		{"bearer with a space inside", header("Authorization", "Bearer bbx_a b"), "bbx_a b", nil},
		{"bearer with nothing", header("Authorization", "Bearer "), "", token.ErrMissing},
		{"bearer with white space only", header("Authorization", "Bearer    "), "", token.ErrMissing},
		{"bearer with no space", header("Authorization", "Bearer"), "", token.ErrMissing},
		{"bearer and a tab", header("Authorization", "Bearer\tbbx_a"), "", token.ErrMissing},
		{"basic is no token", header("Authorization", "Basic YTpi"), "", token.ErrMissing},
		{"another scheme", header("Authorization", "Token bbx_a"), "", token.ErrMissing},
		{"a bare token", header("Authorization", "bbx_a"), "", token.ErrMissing},
		{"x-api-key", header("X-Api-Key", "bbx_a"), "bbx_a", nil},
		{"x-api-key in any case", header("x-api-key", "bbx_a"), "bbx_a", nil},
		{"x-api-key trimmed", header("X-Api-Key", " bbx_a\t"), "bbx_a", nil},
		{"x-api-key empty", header("X-Api-Key", "  "), "", token.ErrMissing},
		{"both, the same", header("Authorization", "Bearer bbx_a", "X-Api-Key", "bbx_a"), "bbx_a", nil},
		{"both, different", header("Authorization", "Bearer bbx_a", "X-Api-Key", "bbx_b"), "", token.ErrConflict},
		{"two bearers, the same", header("Authorization", "Bearer bbx_a", "Authorization", "bearer bbx_a"), "bbx_a", nil},
		{"two bearers, different", header("Authorization", "Bearer bbx_a", "Authorization", "Bearer bbx_b"), "", token.ErrConflict},
		{"two x-api-keys, different", header("X-Api-Key", "bbx_a", "X-Api-Key", "bbx_b"), "", token.ErrConflict},
		{"an empty bearer beside x-api-key", header("Authorization", "Bearer ", "X-Api-Key", "bbx_a"), "bbx_a", nil},
		{"basic beside x-api-key", header("Authorization", "Basic YTpi", "X-Api-Key", "bbx_a"), "bbx_a", nil},
		{"basic, then bearer", header("Authorization", "Basic YTpi", "Authorization", "Bearer bbx_a"), "bbx_a", nil},
		{"another header is not read", header("X-Token", "bbx_a"), "", token.ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "http://broker/", nil)
			r.Header = tt.header
			got, err := token.FromRequest(r)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("FromRequest(%v) = %q, %v, want %q, %v", tt.header, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestFromRequest_NoAllocs keeps reading the usual one token off the
// hot path's allocations.
func TestFromRequest_NoAllocs(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://broker/", nil)
	r.Header.Set("X-Api-Key", "bbx_a")
	r.Header.Set("Authorization", "Bearer bbx_a")
	if n := testing.AllocsPerRun(100, func() { _, _ = token.FromRequest(r) }); n != 0 {
		t.Errorf("FromRequest allocates %v times, want 0", n)
	}
}

// TestFromRoute reads the token of a route that finds its own candidates
// (find) and of a request handed in with a token (handed), each of which
// the request's own tokens must equal.
func TestFromRoute(t *testing.T) {
	inQuery := func(r *http.Request) []string { return r.URL.Query()["key"] }
	tests := []struct {
		name    string
		target  string
		header  http.Header
		find    func(*http.Request) []string
		handed  []string
		want    string
		wantErr error
	}{
		{"head only", "/", header("X-Api-Key", "bbx_a"), nil, nil, "bbx_a", nil},
		{"find reads the route's place", "/?key=bbx_a", header(), inQuery, nil, "bbx_a", nil},
		{"find replaces the head", "/", header("X-Api-Key", "bbx_a"), inQuery, nil, "", token.ErrMissing},
		{"find, two different", "/?key=bbx_a&key=bbx_b", header(), inQuery, nil, "", token.ErrConflict},
		{"handed, none of its own", "/", header(), nil, []string{"bbx_a"}, "bbx_a", nil},
		{"handed, the same of its own", "/", header("Authorization", "Bearer bbx_a"), nil, []string{"bbx_a"}, "bbx_a", nil},
		{"handed, another of its own", "/", header("Authorization", "Bearer bbx_b"), nil, []string{"bbx_a"}, "", token.ErrConflict},
		{"handed, another found by the route", "/?key=bbx_b", header(), inQuery, []string{"bbx_a"}, "", token.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "http://broker"+tt.target, nil)
			r.Header = tt.header
			got, err := token.FromRoute(r, tt.find, tt.handed...)
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("FromRoute(%s %v, %v) = %q, %v, want %q, %v", tt.target, tt.header, tt.handed, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestAppendSent(t *testing.T) {
	h := header("X-Api-Key", "bbx_c", "Authorization", "Basic YTpi", "Authorization", "Bearer bbx_a", "Authorization", "bearer bbx_b")
	got := token.AppendSent([]string{"x"}, h)
	if want := []string{"x", "bbx_a", "bbx_b", "bbx_c"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("AppendSent = %q, want %q", got, want)
	}
	if got := token.AppendSent(nil, header("Authorization", "Basic YTpi")); got != nil {
		t.Errorf("AppendSent(nil, no token) = %q, want nil", got)
	}
}

func TestOne(t *testing.T) {
	tests := []struct {
		found   []string
		want    string
		wantErr error
	}{
		{nil, "", token.ErrMissing},
		{[]string{}, "", token.ErrMissing},
		{[]string{"a"}, "a", nil},
		{[]string{"a", "a"}, "a", nil},
		{[]string{"a", "b"}, "", token.ErrConflict},
		{[]string{"a", "a", "b"}, "", token.ErrConflict},
	}
	for _, tt := range tests {
		got, err := token.One(tt.found)
		if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
			t.Errorf("One(%q) = %q, %v, want %q, %v", tt.found, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestBearer(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"none", header(), ""},
		{"bearer", header("Authorization", "Bearer bba_a"), "bba_a"},
		{"bearer in lower case", header("Authorization", "bearer bba_a"), "bba_a"},
		{"bearer in mixed case", header("Authorization", "bEaReR bba_a"), "bba_a"},
		{"bearer trimmed", header("Authorization", "Bearer  bba_a  "), "bba_a"},
		{"bearer with nothing", header("Authorization", "Bearer "), ""},
		{"bearer with no space", header("Authorization", "Bearer"), ""},
		{"basic", header("Authorization", "Basic YTpi"), ""},
		{"only the first value is read", header("Authorization", "Basic YTpi", "Authorization", "Bearer bba_a"), ""},
		{"the first of two bearers", header("Authorization", "Bearer bba_a", "Authorization", "Bearer bba_b"), "bba_a"},
		{"x-api-key is not the admin API's", header("X-Api-Key", "bba_a"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := token.Bearer(tt.header); got != tt.want {
				t.Errorf("Bearer(%v) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

func TestFromProxyAuthorization(t *testing.T) {
	basic := func(cred string) http.Header {
		return header("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	tests := []struct {
		name   string
		header http.Header
		want   string
	}{
		{"none", header(), ""},
		{"basic, the token as the password", basic("box:bbx_a"), "bbx_a"},
		{"basic, the token as the user", basic("bbx_a:"), "bbx_a"},
		{"basic, the token as the user, no colon", basic("bbx_a"), "bbx_a"},
		{"basic, the password wins", basic("bbx_a:bbx_b"), "bbx_b"},
		{"basic, not base64", header("Proxy-Authorization", "Basic %%%"), ""},
		{"bearer", header("Proxy-Authorization", "Bearer bbx_a"), "bbx_a"},
		{"bearer in lower case", header("Proxy-Authorization", "bearer  bbx_a "), "bbx_a"},
		{"bearer with nothing", header("Proxy-Authorization", "Bearer"), ""},
		{"another scheme", header("Proxy-Authorization", "Digest bbx_a"), ""},
		{"authorization is not read", header("Authorization", "Bearer bbx_a"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := token.FromProxyAuthorization(tt.header); got != tt.want {
				t.Errorf("FromProxyAuthorization(%v) = %q, want %q", tt.header, got, tt.want)
			}
		})
	}
}

// record is a stored row: a name under a hash.
type record struct{ name, hash string }

func recordHash(r record) string { return r.hash }

func TestLookup(t *testing.T) {
	const known = "bbx_known"
	errDown := errors.New("store down")
	rows := map[string]record{token.Hash(known): {"alpha", token.Hash(known)}}
	byHash := func(_ context.Context, hash string) (record, error) {
		if r, ok := rows[hash]; ok {
			return r, nil
		}
		return record{}, store.ErrNotFound
	}
	tests := []struct {
		name    string
		token   string
		byHash  func(context.Context, string) (record, error)
		want    string
		wantErr error
	}{
		{"known", known, byHash, "alpha", nil},
		{"unknown", "bbx_unknown", byHash, "", token.ErrUnknown},
		{"the hash itself is no token", token.Hash(known), byHash, "", token.ErrUnknown},
		{"a token with a suffix", known + "x", byHash, "", token.ErrUnknown},
		{"empty", "", func(context.Context, string) (record, error) {
			t.Error("Lookup(\"\") read the store")
			return record{}, nil
		}, "", token.ErrMissing},
		{"store down", known, func(context.Context, string) (record, error) { return record{}, errDown }, "", errDown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := token.Lookup(t.Context(), tt.token, tt.byHash, recordHash)
			if got.name != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Lookup(%q) = %q, %v, want %q, %v", tt.token, got.name, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestLookup_StoreMatchIsNotTrusted: a store that answers a hash with a
// row stored under another (a case-folding or prefix-matching index, or a
// cache keyed wrongly) does not let the token in.
func TestLookup_StoreMatchIsNotTrusted(t *testing.T) {
	const tok = "bbx_attacker"
	tests := []struct {
		name   string
		stored string
	}{
		{"another token's hash", token.Hash("bbx_victim")},
		{"upper-case hex", strings.ToUpper(token.Hash(tok))},
		{"a prefix of the hash", token.Hash(tok)[:32]},
		{"the token itself", tok},
		{"nothing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loose := func(context.Context, string) (record, error) { return record{"victim", tt.stored}, nil }
			if got, err := token.Lookup(t.Context(), tok, loose, recordHash); !errors.Is(err, token.ErrUnknown) {
				t.Errorf("Lookup(%q) with a row stored under %q = %q, %v, want %v", tok, tt.stored, got.name, err, token.ErrUnknown)
			}
		})
	}
}

func TestRedactPath(t *testing.T) {
	p := token.BoxPrefix
	tok := p + strings.Repeat("x", 43)
	tests := []struct{ in, want string }{
		{"/egress/ECHO/v1", "/egress/ECHO/v1"},
		{"/egress/ECHO/bot" + tok + "/getMe", "/egress/ECHO/bot" + p + "…/getMe"},
		{"/a/" + tok + "/" + tok, "/a/" + p + "…/" + p + "…"},
		{"/" + p, "/" + p + "…"},
		{"/a/" + tok + ".json", "/a/" + p + "….json"},
		{"/fountain/api/sandboxes/" + token.GrantPrefix + strings.Repeat("y", 43) + "/x", "/fountain/api/sandboxes/" + token.GrantPrefix + "…/x"},
		{"/" + token.AdminPrefix + "z/" + tok, "/" + token.AdminPrefix + "…/" + p + "…"},
	}
	for _, tt := range tests {
		if got := token.RedactPath(tt.in); got != tt.want {
			t.Errorf("RedactPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
