package client_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/client"
)

// normal re-reads v as generic JSON, so figures compare as JSON numbers.
func normal(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func readVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("../testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestSpendFromRuns_ChantVectors checks every case of chant's own
// spendFromRuns vectors.
func TestSpendFromRuns_ChantVectors(t *testing.T) {
	var file struct {
		Cases []struct {
			Name   string          `json:"name"`
			Doc    json.RawMessage `json:"doc"`
			DocRaw *string         `json:"docRaw"`
			Month  string          `json:"month"`
			Want   json.RawMessage `json:"want"`
		} `json:"cases"`
	}
	readVectors(t, "spend-from-runs.json", &file)
	if len(file.Cases) < 30 {
		t.Fatalf("read %d cases, want the whole file", len(file.Cases))
	}
	for _, tt := range file.Cases {
		t.Run(tt.Name, func(t *testing.T) {
			doc := []byte(tt.Doc)
			if tt.DocRaw != nil {
				doc = []byte(*tt.DocRaw)
			}
			got, err := client.SpendFromRuns(doc, tt.Month)
			if err != nil {
				t.Fatalf("SpendFromRuns(%.80s, %q): %v", doc, tt.Month, err)
			}
			var want any
			if err := json.Unmarshal(tt.Want, &want); err != nil {
				t.Fatal(err)
			}
			if want == nil {
				if got != nil {
					t.Errorf("SpendFromRuns(%.80s, %q) = %+v, want nil", doc, tt.Month, got)
				}
				return
			}
			if got == nil {
				t.Fatalf("SpendFromRuns(%.80s, %q) = nil, want %s", doc, tt.Month, tt.Want)
			}
			if g := normal(t, got); !reflect.DeepEqual(g, want) {
				gb, _ := json.Marshal(got)
				t.Errorf("SpendFromRuns(%.80s, %q) = %s, want %s", doc, tt.Month, gb, tt.Want)
			}
		})
	}
}

func TestSpendFromRuns_NotJSON(t *testing.T) {
	tests := []struct {
		name, doc string
	}{
		{"empty", ""},
		{"truncated", `{"runs":[`},
		{"two values", `{"runs":[]} {"runs":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := client.SpendFromRuns([]byte(tt.doc), "2026-10"); err == nil {
				t.Errorf("SpendFromRuns(%q) = %+v, nil; want an error", tt.doc, got)
			}
		})
	}
}

// TestSpendFromRuns_PrincipalCutKeepsPairs: a principal is cut to 200
// UTF-16 code units, and a surrogate pair astride the cut is left out whole
// rather than split.
func TestSpendFromRuns_PrincipalCutKeepsPairs(t *testing.T) {
	name := "github:" + strings.Repeat("o", 192) + "😀x" // 199 units, then a pair at 199-200
	doc := `{"runs":[{"startedAt":"2026-10-01T00:00:00Z","by":` + string(mustJSON(t, name)) + `,"cost":{"amount":1,"currency":"USD"}}]}`
	got, err := client.SpendFromRuns([]byte(doc), "2026-10")
	if err != nil {
		t.Fatal(err)
	}
	want := "github:" + strings.Repeat("o", 192)
	if p := got.ByPrincipal[0].Principal; p == nil || *p != want {
		t.Errorf("principal = %v, want %q", p, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
