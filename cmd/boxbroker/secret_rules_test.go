package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
	"github.com/intentius/boxbroker/internal/store"
)

// TestCLI_SecretRulesRoundTrip: `secret set --allow ... --rate`, on the
// store and through the admin API, keeps the rules and rate with the
// secret (written as the broker reads them), `secret list` shows them,
// the change is in the audit log, setting the secret again without them
// allows everything again, and a rule or rate that is no such thing is
// refused saying why.
func TestCLI_SecretRulesRoundTrip(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("shop")
	const value = "ghp_CLIRULESVALUE0123456789"
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "GITHUB", "--host", "https://api.github.com",
				"--allow", "get /repos/acme/**", "--allow", "POST /repos/acme/*/issues", "--rate", "120/m")
			if code != 0 {
				t.Fatalf("secret set --allow --rate = %d %s", code, errs)
			}
			if !strings.Contains(out, "GITHUB allows only GET /repos/acme/** and POST /repos/acme/*/issues, at most 120/m for each box") {
				t.Errorf("secret set printed %q, want it to name the rules and rate", out)
			}
			want := []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}
			sec, err := b.Server.Store.Secret(t.Context(), "shop", "GITHUB")
			if err != nil || !slices.Equal(sec.Rules, want) || sec.Rate != "120/m" {
				t.Errorf("stored GITHUB's rules = %q %q, %v, want %q 120/m", sec.Rules, sec.Rate, err, want)
			}
			code, out, errs = runEnv(t, tt.env, "", "secret", "list", "shop")
			if code != 0 || !strings.Contains(out, "ALLOWS") || !strings.Contains(out, "GET /repos/acme/**; POST /repos/acme/*/issues") || !strings.Contains(out, "120/m") {
				t.Errorf("secret list = %d %q %q, want GITHUB's rules and rate", code, out, errs)
			}
			if strings.Contains(out+errs, value) {
				t.Errorf("secret list printed the value")
			}
			entries, err := b.Server.Store.ListAudit(t.Context(), store.AuditQuery{Box: "shop", Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			audited := false
			for _, e := range entries {
				audited = audited || strings.Contains(e.Message, "GITHUB") && strings.Contains(e.Message, "POST /repos/acme/*/issues") && strings.Contains(e.Message, "120/m")
				if strings.Contains(e.Message, value) {
					t.Errorf("audit entry %q holds the value", e.Message)
				}
			}
			if !audited {
				t.Errorf("no audit entry names GITHUB's rules and rate")
			}

			if code, _, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "GITHUB", "--host", "https://api.github.com"); code != 0 {
				t.Fatalf("secret set again = %d %s", code, errs)
			}
			if sec, err := b.Server.Store.Secret(t.Context(), "shop", "GITHUB"); err != nil || sec.Rules != nil || sec.Rate != "" {
				t.Errorf("GITHUB set again without rules = %q %q, %v, want none", sec.Rules, sec.Rate, err)
			}

			bad := []struct {
				name, flag, arg, says string
			}{
				{"no pattern", "--allow", "GET", "METHOD PATTERN"},
				{"no leading slash", "--allow", "GET repos/**", "beginning with /"},
				{"** not last", "--allow", "GET /**/issues", "must come last"},
				{"part of a segment", "--allow", "GET /repos/ac*", "whole segment"},
				{"encoded", "--allow", "GET /repos/acme%2Fx", "decoded"},
				{"rate without a period", "--rate", "120", "N/PERIOD"},
				{"rate of a day", "--rate", "120/d", "s, m or h"},
			}
			for _, bt := range bad {
				code, _, errs := runEnv(t, tt.env, value+"\n", "secret", "set", "shop", "OTHER", "--host", "https://x.example", bt.flag, bt.arg)
				if code != 2 || !strings.Contains(errs, bt.says) {
					t.Errorf("%s: secret set %s %q = %d %q, want 2 saying %q", bt.name, bt.flag, bt.arg, code, errs, bt.says)
				}
			}
		})
	}
}

// TestCLI_SecretRulesAlone: `secret rules BOX NAME --allow … --rate …`,
// on the store and through the admin API, sets a held secret's rules and
// rate without its value (none is read), which still reaches the host;
// `secret list` shows them, the broker holds the box's requests to them,
// and with neither flag it clears them, saying so. A bad rule or rate, a
// value in argv, or no name exits 2 saying why; a secret that is not
// there exits 1.
func TestCLI_SecretRulesAlone(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	const value = "sk_cli_rulesalone_0123456789"
	got := make(chan string, 1)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Header.Get("Authorization"):
		default:
		}
	}))
	t.Cleanup(host.Close)
	tok := b.AddBox("shop")
	b.SetSecret("shop", "ECHO", host.URL, value)
	b.Report(tok, brokertest.Entry(protocol.Egress, "ECHO"))
	sealed := func() []byte {
		t.Helper()
		sec, err := b.Server.Store.Secret(t.Context(), "shop", "ECHO")
		if err != nil {
			t.Fatal(err)
		}
		return sec.Sealed
	}
	held := sealed()
	// egress sends method path as the box and returns the status, and
	// what the host was sent in place of the box's token.
	egress := func(method, path string) (int, string) {
		t.Helper()
		b.Sync()
		r := b.Do(method, "/egress/ECHO"+path, tok, nil, nil)
		select {
		case auth := <-got:
			return r.StatusCode, auth
		default:
			return r.StatusCode, ""
		}
	}
	for _, tt := range storeAndAdminAPI(t, b) {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tt.env, "", "secret", "rules", "shop", "ECHO", "--allow", "get /ok/**", "--rate", "100/m")
			if code != 0 || !strings.Contains(out, "set the rules of secret ECHO of box shop") || !strings.Contains(out, "ECHO allows only GET /ok/**, at most 100/m for each box") {
				t.Fatalf("secret rules --allow --rate = %d %q %q, want it to name the rules and rate", code, out, errs)
			}
			sec, err := b.Server.Store.Secret(t.Context(), "shop", "ECHO")
			if err != nil || !slices.Equal(sec.Rules, []string{"GET /ok/**"}) || sec.Rate != "100/m" || !bytes.Equal(sec.Sealed, held) || sec.Host != host.URL {
				t.Errorf("stored ECHO = %q %q %s, %v, want GET /ok/** 100/m, its value and host kept", sec.Rules, sec.Rate, sec.Host, err)
			}
			code, out, errs = runEnv(t, tt.env, "", "secret", "list", "shop")
			if code != 0 || !strings.Contains(out, "GET /ok/**") || !strings.Contains(out, "100/m") || strings.Contains(out+errs, value) {
				t.Errorf("secret list = %d %q %q, want ECHO's rules and rate and never its value", code, out, errs)
			}
			if status, auth := egress("GET", "/ok/x"); status != http.StatusOK || auth != "Bearer "+value {
				t.Errorf("GET inside the rules = %d, the host was sent %q; want 200 and the value", status, auth)
			}
			if status, _ := egress("POST", "/ok/x"); status != http.StatusForbidden {
				t.Errorf("POST outside the rules = %d, want 403", status)
			}
			// The refusal names the command that allows the request,
			// whole: run as it is, it keeps the rules and rate held and
			// adds the request's, and sends no value.
			b.Sync()
			_, msg := brokertest.Refusal(b.Do("POST", "/egress/ECHO/ok/y", tok, nil, nil).Body)
			command := regexp.MustCompile("`boxbroker ([^`]*)`").FindStringSubmatch(msg)
			if command == nil {
				t.Fatalf("the refusal %q names no boxbroker command", msg)
			}
			args := regexp.MustCompile(`'[^']*'|\S+`).FindAllString(command[1], -1)
			for i, a := range args {
				args[i] = strings.Trim(a, "'")
			}
			if code, out, errs := runEnv(t, tt.env, "", args...); code != 0 || !strings.Contains(out, "ECHO allows only GET /ok/** and POST /ok/y, at most 100/m for each box") {
				t.Fatalf("the refusal's command %q = %d %q %q, want the request's rule added to the rules and rate held", args, code, out, errs)
			}
			if status, auth := egress("POST", "/ok/y"); status != http.StatusOK || auth != "Bearer "+value {
				t.Errorf("POST once the refusal's command ran = %d, the host was sent %q; want 200 and the value", status, auth)
			}

			code, out, errs = runEnv(t, tt.env, "", "secret", "rules", "shop", "ECHO")
			if code != 0 || !strings.Contains(out, "ECHO allows any method and path, with no rate: its rules are cleared") {
				t.Fatalf("secret rules with neither flag = %d %q %q, want it to say the rules are cleared", code, out, errs)
			}
			if sec, err := b.Server.Store.Secret(t.Context(), "shop", "ECHO"); err != nil || len(sec.Rules) != 0 || sec.Rate != "" || !bytes.Equal(sec.Sealed, held) {
				t.Errorf("stored ECHO after clearing = %q %q, %v, want none and its value kept", sec.Rules, sec.Rate, err)
			}
			if code, out, _ := runEnv(t, tt.env, "", "secret", "list", "shop"); code != 0 || strings.Contains(out, "GET /ok/**") || strings.Contains(out, "100/m") {
				t.Errorf("secret list after clearing = %d %q, want no rules and no rate", code, out)
			}
			if status, auth := egress("POST", "/ok/x"); status != http.StatusOK || auth != "Bearer "+value {
				t.Errorf("POST after clearing = %d, the host was sent %q; want 200 and the value", status, auth)
			}

			bad := []struct {
				name string
				args []string
				code int
				says string
			}{
				{"no pattern", []string{"ECHO", "--allow", "GET"}, 2, "METHOD PATTERN"},
				{"** not last", []string{"ECHO", "--allow", "GET /**/x"}, 2, "must come last"},
				{"rate of a day", []string{"ECHO", "--rate", "5/d"}, 2, "s, m or h"},
				{"a value in argv", []string{"ECHO", value}, 2, "secret rules takes BOX NAME"},
				{"no name", nil, 2, "secret rules takes BOX NAME"},
				{"lower-case name", []string{"echo"}, 2, "must match"},
				{"--host", []string{"ECHO", "--host", host.URL}, 2, "not defined: -host"},
				{"no such secret", []string{"OTHER"}, 1, "has no secret named OTHER"},
			}
			for _, bt := range bad {
				args := append([]string{"secret", "rules", "shop"}, bt.args...)
				code, out, errs := runEnv(t, tt.env, value+"\n", args...)
				if code != bt.code || !strings.Contains(errs, bt.says) || strings.Contains(out+errs, value) {
					t.Errorf("%s: %q = %d %q, want %d saying %q and never the value", bt.name, args, code, errs, bt.code, bt.says)
				}
			}
			if _, errs, code := run(t, t.TempDir(), "", "secret", "rule", "shop", "ECHO"); code != 2 || !strings.Contains(errs, `did you mean "rules"?`) {
				t.Errorf("secret rule = %d %q, want 2 suggesting rules", code, errs)
			}
		})
	}
}
