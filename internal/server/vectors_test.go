package server_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"slices"
	"testing"

	"github.com/intentius/boxbroker/internal/brokertest"
)

// TestScopeWords_Vectors classifies every request of chant's scope-words
// vectors with the broker's capability table.
func TestScopeWords_Vectors(t *testing.T) {
	b, err := os.ReadFile("../../testdata/scope-words.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []struct {
			Name   string          `json:"name"`
			Method string          `json:"method"`
			Path   string          `json:"path"`
			Body   json.RawMessage `json:"body"`
			Want   struct {
				Capability *string   `json:"capability"`
				Words      *[]string `json:"words"`
			} `json:"want"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("scope-words.json holds no cases")
	}
	br := brokertest.New(t, brokertest.Options{Fountain: true})
	for _, tt := range doc.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			var body []byte
			if tt.Body != nil {
				body = tt.Body
			}
			r := httptest.NewRequest("GET", "http://broker.test/", bytes.NewReader(body))
			r.Method = tt.Method
			r.URL.Path = tt.Path
			c, need, ok, err := br.Server.Broker.Classify(r)
			if err != nil {
				t.Fatalf("Classify(%s %s) error %v", tt.Method, tt.Path, err)
			}
			var gotCap *string
			if c != nil {
				n := c.Name()
				gotCap = &n
			}
			if (gotCap == nil) != (tt.Want.Capability == nil) || (gotCap != nil && *gotCap != *tt.Want.Capability) {
				t.Fatalf("Classify(%s %s) capability = %v, want %v", tt.Method, tt.Path, str(gotCap), str(tt.Want.Capability))
			}
			if tt.Want.Words == nil {
				if ok {
					t.Errorf("Classify(%s %s) = words %q, want not served", tt.Method, tt.Path, need.Words)
				}
				return
			}
			if !ok {
				t.Fatalf("Classify(%s %s) = not served, want words %q", tt.Method, tt.Path, *tt.Want.Words)
			}
			if !slices.Equal(need.Words, *tt.Want.Words) && !(len(need.Words) == 0 && len(*tt.Want.Words) == 0) {
				t.Errorf("Classify(%s %s) words = %q, want %q", tt.Method, tt.Path, need.Words, *tt.Want.Words)
			}
		})
	}
}

func str(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}
