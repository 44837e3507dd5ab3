package egressproxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/egressproxy"
)

// TestProxy_SecretTakenAwayIsNotWrittenInAnOpenTunnel: a tunnel opened
// while a secret was pinned to its host writes that secret's value no
// more once the secret is removed, or pinned to another host, even
// before the re-check has judged the tunnel again: the request in it is
// refused and the host sees nothing more.
func TestProxy_SecretTakenAwayIsNotWrittenInAnOpenTunnel(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, f *fixture)
	}{
		{"removed", func(t *testing.T, f *fixture) {
			if err := f.b.Server.Store.DeleteSecret(t.Context(), "shop", "API"); err != nil {
				t.Fatal(err)
			}
		}},
		{"pinned elsewhere", func(t *testing.T, f *fixture) {
			f.b.SetSecret("shop", "API", "https://elsewhere.example", secretValue)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixtureProxy(t, nil, nil, func(pc *egressproxy.Config) { pc.Recheck = time.Hour })
			c := openIntercepted(t, f)
			tt.change(t, f)
			f.b.Sync()
			if err := interGet(f, c); err == nil || !strings.Contains(err.Error(), "403") {
				t.Errorf("a request in the tunnel after the secret was %s = %v, want 403", tt.name, err)
			}
			if seen := f.up.all(); strings.Count(seen, "GET /v1/open") != 1 {
				t.Errorf("the secret's host saw:\n%s\nwant the one request made before the change", seen)
			}
		})
	}
}

// TestProxy_SecretPinnedLaterIsUsableInAnOpenTunnel: a secret pinned to
// a tunnel's host, and declared, after the tunnel opened is used in it
// once the re-check has judged the tunnel again, as in a tunnel opened
// after it.
func TestProxy_SecretPinnedLaterIsUsableInAnOpenTunnel(t *testing.T) {
	f := newFixtureProxy(t, nil, nil, func(pc *egressproxy.Config) { pc.Recheck = time.Hour })
	c := openIntercepted(t, f)
	f.b.SetSecret("shop", "LATER", "https://"+f.host+"/v2", "later_value_0123456789")
	f.b.Report(f.token, brokertest.Entry("egress", "API", "LATER"))
	f.b.Sync()
	f.p.RecheckOnce(t.Context())
	if err := get(c, "GET /v2/items HTTP/1.1\r\nHost: "+f.host+"\r\nAuthorization: Bearer "+f.token+"\r\n\r\n"); err != nil {
		t.Fatalf("a request under the later secret's base path in the open tunnel: %v, want 200", err)
	}
	if seen := f.up.all(); !strings.Contains(seen, "GET /v2/items") || !strings.Contains(seen, "later_value_0123456789") {
		t.Errorf("the secret's host saw:\n%s\nwant /v2/items with the later secret's value", seen)
	}
}
