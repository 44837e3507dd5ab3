package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
