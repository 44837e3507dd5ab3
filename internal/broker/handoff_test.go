package broker_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/intentius/boxbroker/internal/broker"
	"github.com/intentius/boxbroker/internal/brokertest"
	"github.com/intentius/boxbroker/internal/capability"
	"github.com/intentius/boxbroker/internal/protocol"
)

// A request handed in through ServeHandoff is authenticated by the
// Handoff's token, which a token the request carries itself must equal,
// and labelled with the Handoff's Label; a request to ServeHTTP is the
// box's only by a token of its own.
func TestHandoff_TokenIsTheHandoffs(t *testing.T) {
	logs := &brokertest.Buffer{}
	b := brokertest.New(t, brokertest.Options{Logs: logs})
	b.SetCredential("anthropic", "sk-ant-api03-handoff-credential")
	alpha := b.AddBox("alpha")
	beta := b.AddBox("beta")
	b.Report(alpha, brokertest.Entry("inference", "agent"))
	b.Report(beta, brokertest.Entry("inference", "agent"))
	from := netip.MustParseAddr("127.0.0.1")
	tests := []struct {
		name    string
		handoff *broker.Handoff // nil: ServeHTTP
		sent    string          // the token the request carries itself
		want    int
	}{
		{"handed in, no token of its own", &broker.Handoff{Token: alpha, From: from, Label: "door "}, "", 200},
		{"handed in, the same token", &broker.Handoff{Token: alpha, From: from, Label: "door "}, alpha, 200},
		{"handed in, another box's token", &broker.Handoff{Token: alpha, From: from, Label: "door "}, beta, 403},
		{"handed in, no box's token", &broker.Handoff{Token: "bbx_nobody", From: from, Label: "door "}, "", 403},
		{"ServeHTTP, no token", nil, "", 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/llm/anthropic/v1/messages", strings.NewReader(brokertest.MessagesBody))
			r.Header.Set("Content-Type", "application/json")
			if tt.sent != "" {
				r.Header.Set("x-api-key", tt.sent)
			}
			w := httptest.NewRecorder()
			if tt.handoff != nil {
				b.Server.Broker.ServeHandoff(w, r, *tt.handoff)
			} else {
				b.Server.Broker.ServeHTTP(w, r)
			}
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
		})
	}
	if !strings.Contains(logs.String(), `"route":"door /llm/anthropic/v1/messages"`) {
		t.Errorf("no log line with the route door /llm/anthropic/v1/messages:\n%s", logs)
	}
}

// A Tunnel handed in is served for its box within the box's limits, and
// a refusal it returns before answering is written as the broker's.
func TestHandoff_Tunnel(t *testing.T) {
	b := brokertest.New(t, brokertest.Options{})
	alpha := b.AddBox("alpha")
	served := 0
	tunnel := func(err error) *broker.Tunnel {
		return &broker.Tunnel{Capability: protocol.Egress, Route: "door tunnel",
			Serve: func(w http.ResponseWriter, r *http.Request) (broker.TunnelEnd, error) {
				served++
				if err != nil {
					return broker.TunnelEnd{}, err
				}
				return broker.TunnelEnd{Bytes: 3, Message: "tunnelled"}, nil
			}}
	}
	tests := []struct {
		name   string
		tok    string
		err    error
		want   int
		served int
	}{
		{"served", alpha, nil, 200, 1},
		{"refused by its Serve", alpha, &capability.Error{Status: 502, Type: protocol.TypeAPI, Reason: capability.ReasonUpstreamFailed, Message: "not reached"}, 502, 1},
		{"a failure of its Serve", alpha, errors.New("boom"), 502, 1},
		{"no box's token", "bbx_nobody", nil, 403, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served = 0
			w := httptest.NewRecorder()
			r := httptest.NewRequest("CONNECT", "/", nil)
			b.Server.Broker.ServeHandoff(w, r, broker.Handoff{Token: tt.tok, From: netip.MustParseAddr("127.0.0.1"), Tunnel: tunnel(tt.err)})
			if w.Code != tt.want || served != tt.served {
				t.Fatalf("status %d, served %d times; want %d, %d: %s", w.Code, served, tt.want, tt.served, w.Body)
			}
		})
	}
}
