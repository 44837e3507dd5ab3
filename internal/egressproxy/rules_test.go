package egressproxy_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestProxy_RequestOutsideTheSecretsRulesIsRefused gives API rules and
// sends requests through an intercepted tunnel: those outside them (by
// method, by a _method naming one, by path, by an encoded slash read as
// a separator) are refused
// 403 naming egress, the secret and its rules, and never reach the host;
// those inside are forwarded.
func TestProxy_RequestOutsideTheSecretsRulesIsRefused(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecretRules("shop", "API", []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}, "")
	c := f.client(t, f.token, f.caPool, false)
	tests := []struct {
		name, method, path string
		status             int
	}{
		{"allowed read", "GET", "/repos/acme/app", 200},
		{"allowed write", "POST", "/repos/acme/app/issues", 200},
		{"method outside", "DELETE", "/repos/acme/app", 403},
		{"path outside", "GET", "/repos/other/app", 403},
		{"* is one segment", "POST", "/repos/acme/app/x/issues", 403},
		{"encoded slash read as a separator", "POST", "/repos/acme/app%2Fx/issues", 403},
		{"encoded slash into the prefix", "GET", "/repos%2Facme/app", 403},
		{"_method naming a method outside", "POST", "/repos/acme/app/issues?_method=DELETE", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(f.up.all(), "\n----\n")
			req, err := http.NewRequest(tt.method, "https://"+f.host+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s through the proxy = %d %s, want %d", tt.method, tt.path, resp.StatusCode, body, tt.status)
			}
			reached := strings.Contains(f.up.all(), tt.method+" "+tt.path+" ")
			if tt.status == 403 {
				if reached || strings.Count(f.up.all(), "\n----\n") != before {
					t.Errorf("%s %s reached the host, want it refused before", tt.method, tt.path)
				}
				_, msg := brokertest.Refusal(body)
				for _, w := range []string{"Egress", "API", "GET /repos/acme/** and POST /repos/acme/*/issues", "--allow"} {
					if !strings.Contains(msg, w) {
						t.Errorf("%s %s refusal = %q, want it to say %q", tt.method, tt.path, msg, w)
					}
				}
			} else if !reached {
				t.Errorf("%s %s did not reach the host as sent", tt.method, tt.path)
			}
		})
	}
}

// TestProxy_SecretRatePerBox gives API a rate of 1 a minute: the box's
// second request through a tunnel is refused 429 with Retry-After, and
// the host is reached once.
func TestProxy_SecretRatePerBox(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecretRules("shop", "API", nil, "1/m")
	c := f.client(t, f.token, f.caPool, false)
	statuses := getStatuses(t, c, "https://"+f.host+"/v1/rated", 2)
	if statuses[0] != 200 || statuses[1] != 429 {
		t.Errorf("statuses %v, want [200 429] (API at 1/m)", statuses)
	}
	if n := strings.Count(f.up.all(), "GET /v1/rated"); n != 1 {
		t.Errorf("the host received %d requests, want 1", n)
	}
}

// TestProxy_BodyIsJudgedForAMethodByItsType: through an intercepted
// tunnel to a secret allowing only POST /repos/acme/*/issues, a file of
// 5 MB of a type no host reads a _method from (application/octet-stream,
// image/png) passes whole, unread; a JSON body naming _method=DELETE
// under a type whose parameter names "/json", which Laravel reads as
// JSON, is refused 403 naming DELETE and never reaches the host.
func TestProxy_BodyIsJudgedForAMethodByItsType(t *testing.T) {
	f := newFixture(t)
	f.b.SetSecretRules("shop", "API", []string{"GET /repos/acme/**", "POST /repos/acme/*/issues"}, "")
	c := f.client(t, f.token, f.caPool, false)
	file := strings.Repeat("x", 5<<20) + "&_method=DELETE"
	tests := []struct {
		name, ct, body string
		status         int
	}{
		{"a 5 MB file", "application/octet-stream", file, 200},
		{"a 5 MB image", "image/png", file, 200},
		{"_method in JSON under a type naming /json in a parameter", `text/plain; x="/json"`, `{"_method":"DELETE"}`, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(f.up.all(), "\n----\n")
			req, err := http.NewRequest("POST", "https://"+f.host+"/repos/acme/app/issues", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", tt.ct)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("POST %s through the proxy = %d %.300s, want %d", tt.name, resp.StatusCode, body, tt.status)
			}
			seen := f.up.all()
			if tt.status == 200 && !strings.HasSuffix(seen, "\n\n"+tt.body) {
				t.Errorf("the host did not receive the body whole")
			}
			if tt.status == 403 {
				if strings.Count(seen, "\n----\n") != before || strings.Contains(seen, tt.body) {
					t.Errorf("the body reached the host, want it refused before")
				}
				if _, msg := brokertest.Refusal(body); !strings.Contains(msg, "this request was DELETE") {
					t.Errorf("refusal = %q, want it to name DELETE", msg)
				}
			}
		})
	}
}
