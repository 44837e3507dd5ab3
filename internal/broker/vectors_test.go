package broker_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// TestDeclaration_Vectors posts every body of chant's declaration-reports
// vectors to the real handler, as a box's report, and holds the answer to
// the vector: its status, and for a 200 the capabilities, listing and
// spend it answers with (declarationKept), as protocol's own vector test
// holds ParseDeclarationReport. A report the vector lets a broker that
// validates scope words against the schema refuse may be a 400 naming a
// control character.
func TestDeclaration_Vectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "declaration-reports.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name   string          `json:"name"`
			Broker string          `json:"broker"`
			Body   json.RawMessage `json:"body"`
			Raw    *string         `json:"raw"`
			Note   string          `json:"note"`
			Want   struct {
				Status       int             `json:"status"`
				Capabilities json.RawMessage `json:"capabilities"`
				Listing      json.RawMessage `json:"listing"`
				Spend        json.RawMessage `json:"spend"`
			} `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// One broker for each broker word the vectors answer for.
	brokers := map[string]*brokertest.Broker{}
	tokens := map[string]string{}
	for _, tt := range doc.Cases {
		if brokers[tt.Broker] == nil {
			b := brokertest.New(t, brokertest.Options{Broker: tt.Broker})
			brokers[tt.Broker], tokens[tt.Broker] = b, b.AddBox("a")
		}
	}
	for _, tt := range doc.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			b := brokers[tt.Broker]
			body := []byte(tt.Body)
			if tt.Raw != nil {
				body = []byte(*tt.Raw)
			}
			resp := b.Do("POST", protocol.RouteDeclaration, tokens[tt.Broker], body, nil)
			_, msg := brokertest.Refusal(resp.Body)
			if tt.Want.Status == 200 && resp.StatusCode == 400 && strings.Contains(msg, "control character") &&
				strings.Contains(tt.Note, "may refuse this report") {
				return
			}
			if resp.StatusCode != tt.Want.Status {
				t.Fatalf("report = %d %s, want %d", resp.StatusCode, resp.Body, tt.Want.Status)
			}
			if tt.Want.Status != 200 {
				if msg == "" {
					t.Errorf("the %d is not a refusal: %s", resp.StatusCode, resp.Body)
				}
				return
			}
			var kept struct {
				Capabilities json.RawMessage `json:"capabilities"`
				Listing      json.RawMessage `json:"listing"`
				Spend        json.RawMessage `json:"spend"`
			}
			if err := json.Unmarshal(resp.Body, &kept); err != nil {
				t.Fatalf("answer %s: %v", resp.Body, err)
			}
			sameJSON(t, "capabilities", kept.Capabilities, tt.Want.Capabilities)
			sameJSON(t, "listing", kept.Listing, tt.Want.Listing)
			sameJSON(t, "spend", kept.Spend, tt.Want.Spend)
		})
	}
}

// sameJSON fails unless got and want are the same JSON value, an absent
// one being null.
func sameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	norm := func(raw json.RawMessage) []byte {
		var v any
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &v)
		}
		b, _ := json.Marshal(v)
		return b
	}
	if g, w := norm(got), norm(want); !bytes.Equal(g, w) {
		t.Errorf("%s = %s, want %s", what, g, w)
	}
}
