package admin_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/operator"
)

// TestAdmin_RotateReadsAChunkedBody: POST /api/boxes/{name}/token reads
// a body of unknown length (chunked) as every other route does: its
// lifetime is applied and a bad one refused, never silently dropped.
func TestAdmin_RotateReadsAChunkedBody(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	b.AddBox("alpha")
	rotate := func(body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", b.AdminURL+"/api/boxes/alpha/token", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1 // sent chunked
		req.Header.Set("Authorization", "Bearer "+b.AdminToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rb, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, rb
	}

	code, body := rotate(`{"ttl":"1h"}`)
	var rotated operator.BoxToken
	if err := json.Unmarshal(body, &rotated); code != 200 || err != nil {
		t.Fatalf("rotate with a chunked {\"ttl\":\"1h\"} = %d %s, want 200", code, body)
	}
	if rotated.Box.TokenTTL == nil || rotated.Box.ExpiresAt == nil {
		t.Errorf("rotate with a chunked {\"ttl\":\"1h\"} = %+v, want the token's lifetime 1h and when it ends", rotated.Box)
	}

	code, body = rotate(`{"ttl":"-1h"}`)
	if typ, msg := brokertest.Refusal(body); code != 400 || typ == "" || msg == "" {
		t.Errorf("rotate with a chunked {\"ttl\":\"-1h\"} = %d %s, want a 400 refusal", code, body)
	}
}
