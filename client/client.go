// Package client is the box's side of the Broker Protocol: what a box's
// steward uses to tell its broker what the box declared. It builds a
// declaration report from what `chant workspace status --json` prints
// (ReportFromStatus), computes the month's spend from what
// `chant workspace runs --json` prints (SpendFromRuns, as chant's
// spendFromRuns does), and posts the report with the box's own token
// (Client.Report).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/protocol"
)

// Wire types, as the protocol's schema names them.
type (
	// Capability is one entry of a box block: a name, the broker word that
	// brokers it and its scope words.
	Capability = protocol.Capability
	// Listing is a box block's listing, less the cover.
	Listing = protocol.Listing
	// Spend is what a box's runs spent in one calendar month.
	Spend = protocol.Spend
	// PrincipalSpend is one principal's part of a Spend.
	PrincipalSpend = protocol.PrincipalSpend
	// Payer says whose credential pays for the box's model calls.
	Payer = protocol.Payer
	// Kept is the broker's answer to a report: what it kept, and when.
	Kept = protocol.Kept
)

// Report is the body of POST /api/box/declaration (declarationReport).
// Listing and Spend are optional and left out when nil.
type Report struct {
	Capabilities []Capability `json:"capabilities"`
	Listing      *Listing     `json:"listing,omitempty"`
	Spend        *Spend       `json:"spend,omitempty"`
}

// maxAnswer bounds the broker's answer the client reads.
const maxAnswer = 1 << 20

// Client talks to one broker as one box. Its zero value is not usable;
// make one with New.
type Client struct {
	base  *url.URL
	token string
	// HTTP sends the requests; New sets a client with a 30 second timeout.
	HTTP *http.Client
}

// New returns a client for the broker at brokerURL (its base URL, as the
// box is given it in STUDIO_URL or BOXBROKER_URL) acting with the box's
// token. It returns an error for a URL that is not http or https, or that
// carries credentials, a query or a fragment, and for an empty token.
func New(brokerURL, token string) (*Client, error) {
	u, err := url.Parse(brokerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the broker URL must be an http:// or https:// URL, as in https://broker.example")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the broker URL must hold no credentials, query or fragment: the token is sent as a bearer")
	}
	if token == "" {
		return nil, errors.New("no box token")
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return nil, errors.New("the box token holds white space")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return &Client{base: u, token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

// URL returns the broker's base URL joined with path.
func (c *Client) URL(path string) string {
	u := *c.base
	u.Path += path
	return u.String()
}

// RefusedError is a broker's refusal: its status and the message from its
// refusal body, which says what to change.
type RefusedError struct {
	Status  int
	Type    string
	Message string
}

func (e *RefusedError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the broker answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("the broker answered %d: %s", e.Status, e.Message)
}

// Report posts r to POST /api/box/declaration with the box's token and
// returns what the broker kept. A refusal is a *RefusedError; an answer
// that is not JSON, or over 1 MiB, is an error too.
func (c *Client) Report(ctx context.Context, r Report) (*Kept, error) {
	r.Capabilities = listed(r.Capabilities)
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(protocol.RouteDeclaration), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("report to %s: %w", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read the broker's answer: %w", err)
	}
	if len(answer) > maxAnswer {
		return nil, fmt.Errorf("the broker's answer is over %d bytes", maxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, refused(resp.StatusCode, answer)
	}
	var kept Kept
	if err := json.Unmarshal(answer, &kept); err != nil {
		return nil, fmt.Errorf("the broker's answer to the report is not declarationKept: %w", err)
	}
	return &kept, nil
}

// listed is caps with an empty list for a nil one and for each nil scope,
// so that a report carries [] where the schema wants a list.
func listed(caps []Capability) []Capability {
	if caps == nil {
		caps = []Capability{}
	}
	for i := range caps {
		if caps[i].Scope == nil {
			caps[i].Scope = []string{}
		}
	}
	return caps
}

// refused is a refusal with status and body (protocol.ReadRefusal).
func refused(status int, body []byte) *RefusedError {
	typ, msg := protocol.ReadRefusal(body)
	return &RefusedError{Status: status, Type: typ, Message: msg}
}
