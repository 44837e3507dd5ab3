package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/client"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/protocol"
)

// sample reads the document a testdata sample file holds under "sample".
func sample(t *testing.T, name string) []byte {
	t.Helper()
	var f struct {
		Sample json.RawMessage `json:"sample"`
	}
	readVectors(t, name, &f)
	if len(f.Sample) == 0 {
		t.Fatalf("%s holds no sample", name)
	}
	return f.Sample
}

// stewardCase is declaration-reports.json's case for the report a steward
// makes from the two samples.
func stewardCase(t *testing.T) (body, want json.RawMessage) {
	t.Helper()
	var file struct {
		Cases []struct {
			Name   string          `json:"name"`
			Broker string          `json:"broker"`
			Body   json.RawMessage `json:"body"`
			Want   json.RawMessage `json:"want"`
		} `json:"cases"`
	}
	readVectors(t, "declaration-reports.json", &file)
	for _, c := range file.Cases {
		if c.Name == "the report a steward makes from the status sample's salad box and the runs sample's October spend" {
			if c.Broker != "lobby" {
				t.Fatalf("the steward case is for broker %q", c.Broker)
			}
			return c.Body, c.Want
		}
	}
	t.Fatal("declaration-reports.json has no steward case")
	return nil, nil
}

func stewardReport(t *testing.T) client.Report {
	t.Helper()
	r, err := client.ReportFromStatus(sample(t, "workspace-status.sample.json"), "salad")
	if err != nil {
		t.Fatalf("ReportFromStatus(salad): %v", err)
	}
	r.Spend, err = client.SpendFromRuns(sample(t, "workspace-runs.sample.json"), "2026-10")
	if err != nil || r.Spend == nil {
		t.Fatalf("SpendFromRuns(runs sample, 2026-10) = %v, %v", r.Spend, err)
	}
	return r
}

// TestReport_StewardCase: the report built from the status sample's salad
// box and the runs sample's October is the body chant's vector gives.
func TestReport_StewardCase(t *testing.T) {
	body, _ := stewardCase(t)
	var want any
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	got := stewardReport(t)
	if g := normal(t, got); !reflect.DeepEqual(g, want) {
		gb, _ := json.Marshal(got)
		t.Errorf("steward report = %s\nwant %s", gb, body)
	}
}

// TestClient_ReportKept posts the steward's report to a real broker and
// gets back exactly what the vector says a broker for lobby keeps.
func TestClient_ReportKept(t *testing.T) {
	_, wantRaw := stewardCase(t)
	var want map[string]any
	if err := json.Unmarshal(wantRaw, &want); err != nil {
		t.Fatal(err)
	}
	delete(want, "status")
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("salad")
	c, err := client.New(b.URL+"/", token)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.Report(context.Background(), stewardReport(t))
	if err != nil {
		t.Fatalf("Report: %v", err)
	}
	got := normal(t, kept).(map[string]any)
	if _, ok := got["at"].(string); !ok {
		t.Errorf("kept has no at: %v", got)
	}
	delete(got, "at")
	delete(got, "payer")
	if !reflect.DeepEqual(got, want) {
		gb, _ := json.Marshal(kept)
		t.Errorf("kept = %s\nwant %s", gb, wantRaw)
	}
	// What the broker kept is what it now enforces: the salad box lists
	// inference agent.
	b.SetCredential("anthropic", "sk-ant-api03-CLIENT-TEST")
	resp := b.Do("POST", "/llm/anthropic/v1/messages", token, []byte(`{"model":"m","max_tokens":1,"messages":[]}`), nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a Messages call after the report = %d %s, want 200", resp.StatusCode, resp.Body)
	}
}

func TestClient_ReportRefused(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	token := b.AddBox("salad")
	tests := []struct {
		name       string
		token      string
		report     client.Report
		wantStatus []int
		wantIn     string
	}{
		{"unknown token", "bbx_not-a-box", client.Report{}, []int{401, 403}, ""},
		{"bad capability name", token, client.Report{Capabilities: []client.Capability{{Name: "Not A Name", Broker: "lobby"}}}, []int{400}, "no valid name"},
		{"bad month", token, client.Report{Spend: &client.Spend{Month: "2026"}}, []int{400}, "month"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(b.URL, tt.token)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Report(context.Background(), tt.report)
			var re *client.RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("Report = %v, want a *RefusedError", err)
			}
			ok := false
			for _, s := range tt.wantStatus {
				ok = ok || re.Status == s
			}
			if !ok || re.Message == "" || !strings.Contains(re.Message, tt.wantIn) {
				t.Errorf("Report refused %d %q, want %v naming %q", re.Status, re.Message, tt.wantStatus, tt.wantIn)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

func TestNew_RefusesBadURLs(t *testing.T) {
	tests := []struct {
		name, url, token string
	}{
		{"no scheme", "broker.example", "t"},
		{"ftp", "ftp://broker.example", "t"},
		{"credentials", "https://user:pw@broker.example", "t"},
		{"query", "https://broker.example/?token=x", "t"},
		{"no token", "https://broker.example", ""},
		{"token with a newline", "https://broker.example", "t\nx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := client.New(tt.url, tt.token); err == nil {
				t.Errorf("New(%q, %q) = nil error, want one", tt.url, tt.token)
			}
		})
	}
	c, err := client.New("https://broker.example/base/", "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.URL(protocol.RouteDeclaration); got != "https://broker.example/base/api/box/declaration" {
		t.Errorf("URL = %q", got)
	}
}

func TestReportFromStatus(t *testing.T) {
	doc := sample(t, "workspace-status.sample.json")
	notes, err := client.ReportFromStatus(doc, "notes")
	if err != nil {
		t.Fatalf("ReportFromStatus(notes): %v", err)
	}
	want := client.Report{
		Capabilities: []client.Capability{
			{Name: "inference", Broker: "lobby", Scope: []string{"agent"}},
			{Name: "fountain", Broker: "fountain", Scope: []string{"agent", "conversations", "vault"}},
			{Name: "egress", Broker: "lobby", Scope: []string{}},
		},
		Listing: &client.Listing{Published: false, Title: "Notes", Line: "Notes that answer back"},
	}
	if !reflect.DeepEqual(notes, want) {
		t.Errorf("ReportFromStatus(notes) = %+v, want %+v", notes, want)
	}
	tests := []struct {
		name, doc, box, wantErr string
	}{
		{"several boxes, none named", string(doc), "", "several boxes (notes, salad)"},
		{"no such member", string(doc), "soup", "no member named soup"},
		{"a failure document", `{"contract":1,"error":{"code":"no-workspace","message":"no chant.workspace.json here"}}`, "", "no chant.workspace.json here"},
		{"not JSON", `members:`, "", "not what"},
		{"a list, not an object", `[]`, "", `an object with a "members" list: its top level is a JSON array`},
		{"capabilities not a list", `{"members":[{"name":"a","box":{"capabilities":"x"}}]}`, "", `its "members.box.capabilities" is a JSON string`},
		{"no box blocks", `{"members":[{"name":"a","box":null}]}`, "", "no member of the status document has a box block"},
		{"a member without a box", `{"members":[{"name":"a","box":null},{"name":"b","box":{"capabilities":[]}}]}`, "a", "has no box block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.ReportFromStatus([]byte(tt.doc), tt.box)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ReportFromStatus(%s, %q) = %v, want an error naming %q", tt.name, tt.box, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "Go ") {
				t.Errorf("ReportFromStatus(%s, %q) = %v, names a Go type", tt.name, tt.box, err)
			}
		})
	}
	one, err := client.ReportFromStatus([]byte(`{"members":[{"name":"a"},{"name":"b","box":{"capabilities":[{"name":"inference","broker":"lobby"}]}}]}`), "")
	if err != nil || len(one.Capabilities) != 1 || one.Capabilities[0].Scope == nil || one.Listing != nil {
		t.Errorf("ReportFromStatus(one box) = %+v, %v", one, err)
	}
}
