package adminclient_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/intentius/boxbroker/internal/admin/adminclient"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
)

// TestClient_ProxyCA: the client reads and rotates the egress proxy's
// CA as the service does, and a refusal keeps its code.
func TestClient_ProxyCA(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	ctx := context.Background()
	c, err := adminclient.New(b.AdminURL, b.AdminToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.ProxyCA(ctx)
	if err != nil || strings.Count(v.Certificates, "BEGIN CERTIFICATE") != 1 || v.NextFrom != nil {
		t.Fatalf("ProxyCA() = %+v, %v; want one certificate, none pending", v, err)
	}
	r, err := c.RotateProxyCA(ctx, time.Hour)
	if err != nil || !strings.HasPrefix(r.Certificate, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("RotateProxyCA(1h) = %+v, %v", r, err)
	}
	if v, err = c.ProxyCA(ctx); err != nil || v.NextFrom == nil || *v.NextFrom != r.From || !strings.HasSuffix(v.Certificates, r.Certificate) {
		t.Errorf("ProxyCA() after a rotation = %+v, %v; want the new one too, from %s", v, err, r.From)
	}
	if _, err := c.RotateProxyCA(ctx, -time.Hour); operator.CodeOf(err) != operator.Invalid {
		t.Errorf("RotateProxyCA(-1h) = %v, want Invalid", err)
	}
}
