package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/intentius/boxbroker/internal/admin"
	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/token"
)

// jsonEscaped is s with each byte written as a JSON \u escape: the same
// string to a JSON reader, and no run of s's bytes in the body.
func jsonEscaped(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	return b.String()
}

// TestCLI_AdminURLRepeatingTheTokenIsNeverPrinted: an admin URL that is
// not the broker's (a typo, a host taken over) answers every command
// with the admin token the CLI sent it, as a refusal's message and as
// the names in a listing, plain and JSON-escaped; the CLI prints none of
// it, to a terminal's scrollback or a CI job's log, and says the answer
// repeated the token.
func TestCLI_AdminURLRepeatingTheTokenIsNeverPrinted(t *testing.T) {
	tok, err := token.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	for _, escape := range []bool{false, true} {
		echo := func(r *http.Request) string {
			v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			if escape {
				return jsonEscaped(v)
			}
			return v
		}
		hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/api/boxes":
				fmt.Fprintf(w, `{"boxes":[{"name":"%s","createdAt":"2026-01-01T00:00:00.000Z","payer":{"kind":"shared"},"capabilities":[],"from":[]}]}`, echo(r))
			case "/api/credentials":
				fmt.Fprintf(w, `{"credentials":[{"id":"%s","updatedAt":"2026-01-01T00:00:00.000Z"}]}`, echo(r))
			default:
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"%s is no admin token here"}}`, echo(r))
			}
		}))
		t.Cleanup(hostile.Close)
		env := map[string]string{"BOXBROKER_ADMIN_URL": hostile.URL, "BOXBROKER_ADMIN_TOKEN": tok, "BOXBROKER_DATA": t.TempDir()}
		for _, args := range [][]string{
			{"box", "list"},
			{"credential", "list"},
			{"box", "add", "alpha"},
			{"audit"},
			{"secret", "list", "alpha"},
		} {
			code, out, errs := runEnv(t, env, "", args...)
			if strings.Contains(out+errs, tok) || strings.Contains(out+errs, tok[len(token.AdminPrefix):]) {
				t.Errorf("escaped %v: %s printed the admin token: %q %q", escape, strings.Join(args, " "), out, errs)
			}
			if code == 0 || !strings.Contains(errs, "repeats the admin token") {
				t.Errorf("escaped %v: %s = %d %q %q, want it to fail saying the answer repeated the token", escape, strings.Join(args, " "), code, out, errs)
			}
		}
	}
}

// TestCLI_AdminURLPagingWithoutEndIsLeft: an admin URL that answers every
// page of boxes with a next page that starts where the page did, or with
// no boxes and a next page, would have `box list` ask again forever; the
// CLI stops at the first such answer and says so.
func TestCLI_AdminURLPagingWithoutEndIsLeft(t *testing.T) {
	tok, err := token.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	const most = 50 // the stand-in ends the listing itself past this many pages
	for _, page := range []string{
		`{"boxes":[{"name":"alpha","createdAt":"2026-01-01T00:00:00.000Z","payer":{"kind":"shared"},"capabilities":[],"from":[]}],"next":"%s"}`,
		`{"boxes":[],"next":"x%s"}`,
	} {
		asked := 0
		hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked++
			if asked > most {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			after := r.URL.Query().Get("after")
			if after == "" {
				after = "alpha"
			}
			fmt.Fprintf(w, page, strings.TrimPrefix(after, "x"))
		}))
		t.Cleanup(hostile.Close)
		env := map[string]string{"BOXBROKER_ADMIN_URL": hostile.URL, "BOXBROKER_ADMIN_TOKEN": tok, "BOXBROKER_DATA": t.TempDir()}
		code, _, errs := runEnv(t, env, "", "box", "list")
		if code == 0 || asked > 3 || !strings.Contains(errs, "does not move past") {
			t.Errorf("box list against %s = %d %q after %d pages, want it to stop at once, saying the paging does not move on", page, code, errs, asked)
		}
	}
}

// poisoned is v's type with every string in it (fields, list entries,
// pointed-to strings; one entry in each list) set to s.
func poisoned(v any, s string) any {
	p := reflect.New(reflect.TypeOf(v))
	fill(p.Elem(), s)
	return p.Interface()
}

func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), s)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // json.RawMessage and the like
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	}
}

// TestCLI_AdminURLAnswerCannotDriveTheTerminal: an admin URL that is not
// the broker's (or a broker of another version) answers each listing with
// terminal escapes in every string (a box's name, a credential's ID, a
// secret's host): the CLI prints each escaped, so that an answer cannot
// retitle the terminal, write the clipboard (OSC 52) or hide what it
// printed.
func TestCLI_AdminURLAnswerCannotDriveTheTerminal(t *testing.T) {
	tok, err := token.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	const esc = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\u009b"
	answers := map[string]any{
		"/api/boxes":                   admin.BoxList{Boxes: []operator.BoxView{*poisoned(operator.BoxView{}, esc).(*operator.BoxView)}},
		"/api/credentials":             poisoned(admin.CredentialList{}, esc),
		"/api/credentials/pool":        poisoned(operator.PoolList{}, esc),
		"/api/boxes/alpha/secrets":     poisoned(operator.SecretList{}, esc),
		"/api/boxes/alpha/grants":      poisoned(operator.GrantList{}, esc),
		"/api/boxes/alpha/resources":   poisoned(operator.ResourceList{}, esc),
		"/api/visitors":                poisoned(operator.VisitorList{}, esc),
		"/api/boxes/alpha/budgets":     poisoned(operator.BudgetList{}, esc),
		"/api/proposals":               poisoned(operator.ProposalList{}, esc),
		"/api/audit":                   poisoned(admin.AuditList{}, esc),
		"/api/boxes/alpha/rate-limits": poisoned([]operator.RateLimitView{}, esc),
		"/api/boxes/alpha/spend":       poisoned(operator.SpendReport{}, esc),
		"/api/boxes/alpha":             poisoned(operator.BoxView{}, esc),
		"/api/boxes/alpha/token":       poisoned(operator.BoxToken{}, esc),
		"POST /api/boxes":              poisoned(operator.BoxToken{}, esc),
		"POST /api/boxes/alpha/grants": poisoned(operator.IssuedGrant{}, esc),
		"/api/boxes/alpha/payer":       poisoned(operator.BoxView{}, esc),
		"/api/proposals/p1/approve":    poisoned(operator.ProposalView{}, esc),
		"/api/proposals/p1/deny":       poisoned(operator.ProposalView{}, esc),
	}
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			a, ok = answers[r.URL.Path]
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"not_found_error","message":"%s"}}`, jsonEscaped(esc))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(hostile.Close)
	env := map[string]string{"BOXBROKER_ADMIN_URL": hostile.URL, "BOXBROKER_ADMIN_TOKEN": tok, "BOXBROKER_DATA": t.TempDir()}
	for _, args := range [][]string{
		{"box", "list"},
		{"credential", "list"},
		{"secret", "list", "alpha"},
		{"grant", "list", "alpha"},
		{"box", "resources", "alpha"},
		{"visitor", "list"},
		{"budget", "list", "alpha"},
		{"proposals"},
		{"audit"},
		{"limit", "list", "alpha"},
		{"box", "remove", "alpha", "--yes"},
		{"spend", "alpha"},
		{"box", "rotate", "alpha", "--yes"},
		{"box", "pause", "alpha"},
		{"box", "consent", "alpha", "on"},
		{"proposals", "approve", "p1"},
		{"proposals", "deny", "p1"},
		{"box", "add", "alpha"},
		{"grant", "issue", "alpha", "github:ann"},
	} {
		_, out, errs := runEnv(t, env, "", args...)
		if strings.ContainsAny(out+errs, "\x1b\x07\u009b") {
			t.Errorf("%s printed a terminal escape raw: %q %q", strings.Join(args, " "), out, errs)
		}
	}
}

// TestCLI_AdminURLRefusalMessageIsBounded: an admin URL that is not the
// broker's answers a refusal whose message is megabytes long, for the
// CLI to print into a terminal or a CI job's log: the CLI prints its
// first KiB at most and says it is cut.
func TestCLI_AdminURLRefusalMessageIsBounded(t *testing.T) {
	tok, err := token.NewAdmin()
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 2<<20) // 4 MiB, two bytes a rune
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"%s"}}`, long)
	}))
	t.Cleanup(hostile.Close)
	env := map[string]string{"BOXBROKER_ADMIN_URL": hostile.URL, "BOXBROKER_ADMIN_TOKEN": tok, "BOXBROKER_DATA": t.TempDir()}
	code, out, errs := runEnv(t, env, "", "box", "list")
	if code == 0 || len(out)+len(errs) > 2<<10 || !strings.Contains(errs, "[cut: the message is 4194304 bytes]") {
		t.Fatalf("box list against a 4 MiB refusal = %d, %d bytes printed (%.200q…), want at most 2 KiB saying the message is cut", code, len(out)+len(errs), errs)
	}
	if !strings.Contains(errs, strings.Repeat("é", 512)) || !utf8.ValidString(errs) {
		t.Errorf("box list against a 4 MiB refusal printed %q, want the message's first KiB, whole runes", errs)
	}
}
