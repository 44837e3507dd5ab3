package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestEgress_RequestOutsideTheSecretsRulesIsRefused gives ECHO rules and
// sends requests outside them, by method, by path, by a * where a ** is
// needed, and by encodings that decode into an allowed prefix: each is
// refused with a 403 naming egress, the secret and its rules, and never
// reaches the host; the requests inside them are forwarded.
func TestEgress_RequestOutsideTheSecretsRulesIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"GET /repos/acme/**", "POST /repos/acme/*/issues", "* /status"}, "")
	tests := []struct {
		name, method, path string
		status             int
		// hostPath is the path the host must see, for a request forwarded.
		hostPath string
	}{
		{"allowed read", "GET", "/egress/ECHO/repos/acme/app/pulls", 200, "/base/repos/acme/app/pulls"},
		{"allowed read of the prefix itself", "GET", "/egress/ECHO/repos/acme", 200, "/base/repos/acme"},
		{"allowed write", "POST", "/egress/ECHO/repos/acme/app/issues", 200, "/base/repos/acme/app/issues"},
		{"any method", "DELETE", "/egress/ECHO/status", 200, "/base/status"},
		{"method outside", "DELETE", "/egress/ECHO/repos/acme/app", 403, ""},
		{"path outside", "GET", "/egress/ECHO/repos/other/app", 403, ""},
		{"* is one segment, not the rest", "POST", "/egress/ECHO/repos/acme/app/x/issues", 403, ""},
		{"* is no empty segment", "POST", "/egress/ECHO/repos/acme//issues", 403, ""},
		{"longer than the rule", "DELETE", "/egress/ECHO/status/all", 403, ""},
		{"case counts", "GET", "/egress/ECHO/repos/ACME/app", 403, ""},
		{"the base alone", "GET", "/egress/ECHO", 403, ""},
		{"encoded slash and dots", "GET", "/egress/ECHO/repos/acme%2F..%2Fother", 400, ""},
		{"dot segments", "GET", "/egress/ECHO/repos/acme/../other", 400, ""},
		{"encoded slash read as a separator", "POST", "/egress/ECHO/repos/acme/app%2Fx/issues", 403, ""},
		{"encoded slash into the prefix", "GET", "/egress/ECHO/repos%2Facme/app", 403, ""},
		{"double-encoded slash", "POST", "/egress/ECHO/repos/acme/app%252Fx/issues", 403, ""},
		{"encoded backslash", "POST", "/egress/ECHO/repos/acme/app%5Cx/issues", 403, ""},
		{"encoded letters decode as the host reads them", "GET", "/egress/ECHO/repos/%61cme/app", 200, "/base/repos/acme/app"},
		{"encoded letters outside", "GET", "/egress/ECHO/repos/%6Fther/app", 403, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			code, body := rawMethod(t, e.br.URL, tt.method, tt.path, "Authorization: Bearer "+e.token+"\r\n")
			if code != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.status)
			}
			seen := e.echo.Seen()[before:]
			if tt.status != 200 {
				if len(seen) != 0 {
					t.Errorf("%s %s reached the host %d times, want none", tt.method, tt.path, len(seen))
				}
				if tt.status == 403 {
					typ, msg := brokertest.Refusal([]byte(body))
					for _, w := range []string{"Egress", "ECHO", "GET /repos/acme/** and POST /repos/acme/*/issues and * /status", "this request was " + tt.method,
						"`boxbroker secret rules shop ECHO --allow 'GET /repos/acme/**' --allow 'POST /repos/acme/*/issues' --allow '* /status' --allow '" + tt.method + " /"} {
						if !strings.Contains(msg, w) {
							t.Errorf("%s %s refusal = %q, want it to say %q", tt.method, tt.path, msg, w)
						}
					}
					if typ != protocol.TypePermission {
						t.Errorf("%s %s refusal type = %q, want %q", tt.method, tt.path, typ, protocol.TypePermission)
					}
				}
				return
			}
			if len(seen) != 1 || seen[0].Path != tt.hostPath {
				t.Errorf("%s %s: host saw %v, want one request at %s", tt.method, tt.path, seen, tt.hostPath)
			}
		})
	}
}

// TestEgress_MethodOverrideIsJudgedByTheRules: a box allowed only POST
// on a path sends its POST with X-HTTP-Method-Override (or X-HTTP-Method,
// X-Method-Override) naming DELETE, which Google's APIs, Rails and
// ASP.NET act on as the request's method, or X_HTTP_METHOD_OVERRIDE,
// which Puma (for Rails) and Caddy's FastCGI (for Symfony) hand on as
// the same. The host may take it as a
// DELETE, so the rules judge it as one too: refused, naming DELETE, and
// never sent; allowed where a rule allows the method it names.
func TestEgress_MethodOverrideIsJudgedByTheRules(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"POST /items/*", "DELETE /items/old"}, "")
	tests := []struct {
		name, path, header string
		status             int
	}{
		{"override to a method outside", "/egress/ECHO/items/1", "X-HTTP-Method-Override: DELETE", 403},
		{"X-HTTP-Method, lower case", "/egress/ECHO/items/1", "X-HTTP-Method: delete", 403},
		{"X-Method-Override", "/egress/ECHO/items/1", "X-Method-Override: DELETE", 403},
		{"written with _, as Puma and Caddy's FastCGI read it", "/egress/ECHO/items/1", "X_HTTP_METHOD_OVERRIDE: DELETE", 403},
		{"override to a method a rule allows", "/egress/ECHO/items/old", "X-HTTP-Method-Override: DELETE", 200},
		{"override to the request's own method", "/egress/ECHO/items/1", "X-HTTP-Method-Override: POST", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			code, body := rawMethod(t, e.br.URL, "POST", tt.path, "Authorization: Bearer "+e.token+"\r\n"+tt.header+"\r\n")
			if code != tt.status {
				t.Fatalf("POST %s with %s = %d %s, want %d", tt.path, tt.header, code, body, tt.status)
			}
			reached := len(e.echo.Seen()) - before
			if tt.status == 403 {
				if _, msg := brokertest.Refusal([]byte(body)); !strings.Contains(msg, "this request was DELETE") {
					t.Errorf("refusal = %q, want it to name DELETE", msg)
				}
				if reached != 0 {
					t.Errorf("the host was reached %d times, want none", reached)
				}
			} else if reached != 1 {
				t.Errorf("the host was reached %d times, want once", reached)
			}
		})
	}
}

// TestEgress_MethodParamIsJudgedByTheRules: a box allowed only POST on
// a path sends its POST with _method=DELETE in its query, its form, an
// untyped body (which Rack reads as a form, split at ";" too), a
// multipart part (named as Go reads it, or as Rack or PHP read it: by
// its Content-ID, in single quotes) or its JSON body's top level, or as ".method" or
// "_method%00x", which PHP registers as _method: Rails, Laravel and Symfony act on it as a
// DELETE; or in a part under the boundary PHP reads ("xboundary=evil;
// boundary=b": the first "boundary" anywhere) where Go's parser reads
// another, or under the second of two Content-Types (Puma joins them,
// and Rack reads the last boundary). The rules judge it as one: refused, naming DELETE, never sent;
// allowed, whole, where a rule allows the method it names. A body too
// large to read for it is refused where the rules allow only some
// methods; a body of a type no host reads it from (a 5 MB file) is not
// read, and passes whole; a body under a type whose parameters name
// "/json" or "+json" is read as JSON, as Laravel reads it.
func TestEgress_MethodParamIsJudgedByTheRules(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"POST /items/*", "DELETE /items/old", "* /any/*"}, "")
	const form, mp = "application/x-www-form-urlencoded", "multipart/form-data; boundary=b"
	part := func(name, v string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + v + "\r\n--b--\r\n"
	}
	big := "a=" + strings.Repeat("x", 1<<20) + "&_method=DELETE" // past the 1 MiB the broker reads
	file := strings.Repeat("x", 5<<20) + "&_method=DELETE"       // an upload of 5 MB, streamed unread
	tests := []struct {
		name, path, ct, body string
		status               int
	}{
		{"in the query", "/items/1?_method=DELETE", "", "", 403},
		{"in a form, lower case", "/items/1", form, "a=1&_method=delete", 403},
		{"as PHP names it", "/items/1", form, "a=1&.method=DELETE", 403},
		{"as PHP names it in the query", "/items/1?%20_method=DELETE", "", "", 403},
		{"as PHP reads a name cut at a NUL, in the query", "/items/1?_method%00x=DELETE", "", "", 403},
		{"as PHP reads a name cut at a NUL, in a form", "/items/1", form, "a=1&_method%00=DELETE", 403},
		{"in an untyped body, after a ;", "/items/1", "", "a=1;_method=DELETE", 403},
		{"in a multipart part", "/items/1", mp, part("_method", "DELETE"), 403},
		{"in a multipart part named by its Content-ID, as Rack reads it", "/items/1", mp, "--b\r\nContent-ID: _method\r\n\r\nDELETE\r\n--b--\r\n", 403},
		{"in a multipart part named in single quotes, as PHP reads it", "/items/1", mp, strings.ReplaceAll(part("_method", "DELETE"), `"_method"`, `'_method'`), 403},
		{"in JSON", "/items/1", "application/json", `{"a":1,"_method":"DELETE"}`, 403},
		{"in a multipart part of a type that does not parse", "/items/1", "multipart/form-data x; boundary=b", part("_method", "DELETE"), 400},
		{"in a multipart part under the second of two Content-Types", "/items/1", "multipart/form-data; boundary=a\nmultipart/form-data; boundary=b", part("_method", "DELETE") + strings.ReplaceAll(part("a", "1"), "--b", "--a"), 400},
		{"in a multipart part under the boundary PHP reads", "/items/1", "multipart/form-data; xboundary=evil; boundary=b", strings.ReplaceAll(part("_method", "DELETE"), "--b", "--evil") + part("a", "1"), 400},
		{"in JSON, given twice", "/items/1", "application/vnd.api+json", `{"_method":"POST","_method":"DELETE"}`, 403},
		{"in JSON under a type whose parameter names /json, which Laravel reads as JSON", "/items/1", `text/plain; x="/json"`, `{"_method":"DELETE"}`, 403},
		{"in JSON under a type whose parameter names +json", "/items/1", "application/octet-stream; profile=a+json", `{"_method":"DELETE"}`, 403},
		{"in a form too large to read", "/items/1", form, big, 413},
		{"in a form to a method a rule allows", "/items/old", form, "_method=DELETE", 200},
		{"naming the request's own method", "/items/1", form, "_method=POST", 200},
		{"where any method is allowed, too large to read", "/any/1", form, big, 200},
		{"in a body of a type no host reads it from", "/items/1", "application/octet-stream", "_method=DELETE", 200},
		{"a file larger than the broker reads, of a type no host reads it from", "/items/1", "application/octet-stream", file, 200},
		{"a PNG larger than the broker reads", "/items/1", "image/png", file, 200},
		{"a zip larger than the broker reads", "/items/1", "application/zip", file, 200},
		{"none", "/items/1", mp, part("a", "1"), 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(e.echo.Seen())
			sep := "?"
			if strings.Contains(tt.path, "?") {
				sep = "&"
			}
			h := http.Header{"Authorization": {"Bearer " + e.token}}
			if tt.ct != "" {
				h["Content-Type"] = strings.Split(tt.ct, "\n")
			}
			resp, body := e.do(t, "POST", "/egress/ECHO"+tt.path+sep+"do=upload", h, strings.NewReader(tt.body))
			if resp.StatusCode != tt.status {
				t.Fatalf("POST %s %.60q = %d %s, want %d", tt.path, tt.body, resp.StatusCode, body, tt.status)
			}
			reached := len(e.echo.Seen()) - before
			switch {
			case tt.status == 403:
				if _, msg := brokertest.Refusal(body); !strings.Contains(msg, "this request was DELETE") {
					t.Errorf("refusal = %q, want it to name DELETE", msg)
				}
			case tt.status == 413:
				if _, msg := brokertest.Refusal(body); !strings.Contains(msg, "--allow '* PATTERN'") {
					t.Errorf("refusal = %q, want it to name the rule that lets the body through", msg)
				}
			case tt.status == 200:
				if want := fmt.Sprintf(`{"received":%d}`, len(tt.body)); string(body) != want || reached != 1 {
					t.Errorf("the host was reached %d times and answered %s, want once, %s", reached, body, want)
				}
			}
			if tt.status != 200 && reached != 0 {
				t.Errorf("the host was reached %d times, want none", reached)
			}
		})
	}
}

// TestEgress_RefusalsCommandQuotesWhatTheBoxChose: a box sends a path
// outside the rules holding a "'" and a command substitution, which its
// refusal (and a proposal's reason, which the owner reads) quotes in the
// command that would allow it. Run by a shell, that command gives
// `secret rules` the path as the box wrote it, and runs nothing of it.
func TestEgress_RefusalsCommandQuotesWhatTheBoxChose(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"POST /items/*"}, "")
	h := http.Header{"Authorization": {"Bearer " + e.token}}
	resp, body := e.do(t, "POST", "/egress/ECHO/items/a%27%24%28echo%20INJECTED%29%27/x", h, nil)
	_, msg := brokertest.Refusal(body)
	cmd, ok := strings.CutPrefix(msg[strings.Index(msg, "`")+1:], "boxbroker ")
	if resp.StatusCode != 403 || !ok || !strings.HasSuffix(cmd, "`.") {
		t.Fatalf("POST = %d %q, want a 403 naming the command that would allow it", resp.StatusCode, msg)
	}
	out, err := exec.Command(sh, "-c", `printf '%s\n' `+strings.TrimSuffix(cmd, "`.")).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "secret\nrules\nshop\nECHO\n--allow\nPOST /items/*\n--allow\nPOST /items/a'$(echo INJECTED)'/x\n"
	if string(out) != want {
		t.Errorf("the command's words, as a shell reads them = %q, want %q", out, want)
	}
}

// TestEgress_PathOverrideNeverReachesTheHost: a box allowed only
// GET /items/* sends X-Original-URL or X-Rewrite-URL naming /admin/drop,
// which IIS's URL Rewrite sets and Zend Framework and older Symfony route
// by, for the host to act on a path no rule allows; or either written
// with "_" (X_Original_URL), which Caddy's FastCGI hands PHP as the
// same. The request goes to the path the rules judged, without either
// header.
func TestEgress_PathOverrideNeverReachesTheHost(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, []string{"GET /items/*"}, "")
	for _, h := range []string{"X-Original-URL", "X-Rewrite-URL", "X_Original_URL", "X_REWRITE_URL"} {
		before := len(e.echo.Seen())
		code, body := rawMethod(t, e.br.URL, "GET", "/egress/ECHO/items/1", "Authorization: Bearer "+e.token+"\r\n"+h+": /admin/drop\r\n")
		seen := e.echo.Seen()[before:]
		if code != 200 || len(seen) != 1 {
			t.Fatalf("GET with %s = %d %s (host reached %d times), want 200 and once", h, code, body, len(seen))
		}
		for k, vs := range seen[0].Header {
			if slices.Contains(vs, "/admin/drop") {
				t.Errorf("the host saw %s: %q, want no such header", k, vs)
			}
		}
		if seen[0].Path != "/base/items/1" {
			t.Errorf("the host was asked %s, want /base/items/1", seen[0].Path)
		}
	}
}

// TestEgress_RateLimitPerBox gives ECHO a rate of 2 a minute: a box's
// third request is refused with 429 and Retry-After, naming the secret
// and its rate, and never reaches the host, while another box's
// requests to its own ECHO still pass.
func TestEgress_RateLimitPerBox(t *testing.T) {
	e := newEnv(t, nil)
	e.br.SetSecretRules("shop", secretName, nil, "2/m")
	other := e.br.AddBox("other")
	e.br.SetSecret("other", secretName, e.echo.URL+"/base", "sk_other_"+randomHex(16))
	e.br.SetSecretRules("other", secretName, nil, "2/m")
	e.br.Report(other, brokertest.Entry(protocol.Egress, secretName))
	get := func(tok string) (*http.Response, []byte) {
		return e.do(t, http.MethodGet, "/egress/ECHO/v1/charges", http.Header{"Authorization": {"Bearer " + tok}}, nil)
	}
	for i := range 2 {
		if resp, body := get(e.token); resp.StatusCode != http.StatusOK {
			t.Fatalf("shop's request %d = %d %s, want 200", i+1, resp.StatusCode, body)
		}
	}
	before := len(e.echo.Seen())
	resp, body := get(e.token)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("shop's third request = %d %s, want 429", resp.StatusCode, body)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 {
		t.Errorf("Retry-After = %q, want 1 to 60 seconds", resp.Header.Get("Retry-After"))
	}
	typ, msg := brokertest.Refusal(body)
	if typ != protocol.TypeRateLimit || !strings.Contains(msg, "ECHO") || !strings.Contains(msg, "2 requests a minute") || !strings.Contains(msg, "`boxbroker secret rules shop ECHO --rate N/PERIOD`") {
		t.Errorf("refusal = %s %q, want %s naming ECHO, 2 requests a minute and the command that raises it", typ, msg, protocol.TypeRateLimit)
	}
	if n := len(e.echo.Seen()) - before; n != 0 {
		t.Errorf("the refused request reached the host %d times, want none", n)
	}
	for i := range 2 {
		if resp, body := get(other); resp.StatusCode != http.StatusOK {
			t.Fatalf("other's request %d = %d %s, want 200: one box's rate spent another's", i+1, resp.StatusCode, body)
		}
	}
}

// rawMethod sends method target to the broker on a connection of its
// own, the path exactly as given, and returns the answer's status and body.
func rawMethod(t *testing.T, brokerURL, method, target, header string) (int, string) {
	t.Helper()
	addr := strings.TrimPrefix(brokerURL, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: 0\r\nConnection: close\r\n\r\n", method, target, addr, header)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
