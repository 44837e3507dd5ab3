package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Capability is one kept entry of a box's declaration: a capability brokered
// by this broker and the scope words the box declared for it. Scope is never
// nil once parsed, so it encodes as [] rather than null.
type Capability struct {
	Name   string   `json:"name"`
	Broker string   `json:"broker"`
	Scope  []string `json:"scope"`
}

// Listing is a box block's listing as a report carries it, less the cover.
type Listing struct {
	Published bool   `json:"published"`
	Title     string `json:"title"`
	Line      string `json:"line"`
}

// PrincipalSpend is one principal's part of a Spend. Principal is nil for
// the runs that name none.
type PrincipalSpend struct {
	Principal *string `json:"principal"`
	USD       float64 `json:"usd"`
	Runs      int64   `json:"runs"`
	Unpriced  int64   `json:"unpriced"`
}

// Spend is what a box's run records say it spent in one calendar month.
// ByPrincipal is never nil once parsed.
type Spend struct {
	Month       string           `json:"month"`
	USD         float64          `json:"usd"`
	Runs        int64            `json:"runs"`
	Unpriced    int64            `json:"unpriced"`
	ByPrincipal []PrincipalSpend `json:"byPrincipal"`
}

// Declaration is what the broker keeps of a box's last report: the entries
// naming this broker, merged by name, and the optional listing and spend.
// A nil *Declaration stands for a box that has never reported.
type Declaration struct {
	Capabilities []Capability `json:"capabilities"`
	At           time.Time    `json:"at"`
	Listing      *Listing     `json:"listing,omitempty"`
	Spend        *Spend       `json:"spend,omitempty"`
}

// Find returns the entry named capability brokered by broker, or nil.
func (d *Declaration) Find(capability, broker string) *Capability {
	if d == nil {
		return nil
	}
	for i := range d.Capabilities {
		if d.Capabilities[i].Name == capability && d.Capabilities[i].Broker == broker {
			return &d.Capabilities[i]
		}
	}
	return nil
}

// Kept is the body of the 200 answer to a report (declarationKept).
type Kept struct {
	Capabilities []Capability `json:"capabilities"`
	At           string       `json:"at"`
	Payer        *Payer       `json:"payer,omitempty"`
	Listing      *Listing     `json:"listing,omitempty"`
	Spend        *Spend       `json:"spend,omitempty"`
}

// KeptOf builds the answer to a report from what was kept and the payer.
func KeptOf(d *Declaration, payer *Payer) Kept {
	caps := d.Capabilities
	if caps == nil {
		caps = []Capability{}
	}
	return Kept{
		Capabilities: caps,
		At:           FormatTime(d.At),
		Payer:        payer,
		Listing:      d.Listing,
		Spend:        d.Spend,
	}
}

// FormatTime writes t as the protocol's ISO 8601 time, in UTC with
// milliseconds, as JavaScript's Date.toISOString does.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ReportError is a report that is not one; its message says why and is
// safe to show to the box. Status is 400, or 413 for an oversize body.
type ReportError struct {
	Status  int
	Message string
}

func (e *ReportError) Error() string { return e.Message }

func badReport(format string, args ...any) *ReportError {
	return &ReportError{Status: 400, Message: fmt.Sprintf(format, args...)}
}

// ParseDeclarationReport checks a POST /api/box/declaration body the way
// chant's parseDeclarationReport does and returns what a broker answering
// for broker keeps of it, with At left zero for the caller to set. A body
// that is not a report gives a *ReportError (400, or 413 over
// DeclarationMaxBytes).
func ParseDeclarationReport(body []byte, broker string) (*Declaration, error) {
	if len(body) > DeclarationMaxBytes {
		return nil, &ReportError{Status: 413, Message: fmt.Sprintf("The declaration report is over %d bytes.", DeclarationMaxBytes)}
	}
	top, err := object(body)
	if err != nil {
		return nil, badReport("The body is not a declaration report: it must be one JSON object, { \"capabilities\": [...] }.")
	}
	rawCaps, ok := top["capabilities"]
	if !ok || kindOf(rawCaps) != '[' {
		return nil, badReport("The report has no capabilities list: the body must be { \"capabilities\": [{ \"name\", \"broker\", \"scope\" }] }.")
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(rawCaps, &entries); err != nil {
		return nil, badReport("The report's capabilities is not a list.")
	}
	if len(entries) > MaxCapabilities {
		return nil, badReport("The report lists %d capabilities; at most %d are allowed.", len(entries), MaxCapabilities)
	}
	d := &Declaration{Capabilities: []Capability{}}
	index := map[string]int{}
	for i, raw := range entries {
		e, err := object(raw)
		if err != nil {
			return nil, badReport("Capability %d of the report is not an object.", i+1)
		}
		var name string
		if r, ok := e["name"]; !ok || kindOf(r) != '"' || json.Unmarshal(r, &name) != nil || !IsCapabilityName(name) {
			return nil, badReport("Capability %d of the report has no valid name: a name matches ^[a-z][a-z0-9-]{0,62}$.", i+1)
		}
		var b string
		if r, ok := e["broker"]; !ok || kindOf(r) != '"' || json.Unmarshal(r, &b) != nil || b != broker {
			continue // another broker's entry, or none's: not kept, not checked further
		}
		var words []string
		if r, ok := e["scope"]; ok && kindOf(r) == '[' {
			var raws []json.RawMessage
			if err := json.Unmarshal(r, &raws); err != nil {
				return nil, badReport("The scope of %s is not a list.", name)
			}
			if len(raws) > MaxScopeWords {
				return nil, badReport("The scope of %s lists %d words; at most %d are allowed.", name, len(raws), MaxScopeWords)
			}
			for _, wr := range raws {
				var w string
				if kindOf(wr) != '"' || json.Unmarshal(wr, &w) != nil {
					return nil, badReport("The scope of %s holds a word that is not a string.", name)
				}
				if n := jsLen(w); n < 1 || n > MaxScopeWordLen {
					return nil, badReport("The scope of %s holds a word of %d characters; a word has 1 to %d.", name, n, MaxScopeWordLen)
				}
				if strings.ContainsFunc(w, isC0) {
					return nil, badReport("The scope of %s holds a word with a control character (U+0000 to U+001F); a scope word has none.", name)
				}
				words = append(words, w)
			}
		}
		at, seen := index[name]
		if !seen {
			at = len(d.Capabilities)
			index[name] = at
			d.Capabilities = append(d.Capabilities, Capability{Name: name, Broker: broker, Scope: []string{}})
		}
		c := &d.Capabilities[at]
		for _, w := range words {
			if !slices.Contains(c.Scope, w) {
				c.Scope = append(c.Scope, w)
			}
		}
	}
	if r, ok := top["listing"]; ok && kindOf(r) != 'n' {
		l, err := parseListing(r)
		if err != nil {
			return nil, err
		}
		d.Listing = l
	}
	if r, ok := top["spend"]; ok && kindOf(r) != 'n' {
		s, err := parseSpend(r)
		if err != nil {
			return nil, err
		}
		d.Spend = s
	}
	return d, nil
}

func parseListing(raw json.RawMessage) (*Listing, error) {
	o, err := object(raw)
	if err != nil {
		return nil, badReport("The report's listing is not an object.")
	}
	l := &Listing{Published: true}
	if r, ok := o["published"]; ok {
		if k := kindOf(r); k != 't' && k != 'f' {
			return nil, badReport("The listing's published is not true or false.")
		}
		l.Published = kindOf(r) == 't'
	}
	for _, f := range []struct {
		key string
		max int
		dst *string
	}{{"title", MaxTitleLen, &l.Title}, {"line", MaxLineLen, &l.Line}} {
		r, ok := o[f.key]
		if !ok {
			continue
		}
		if kindOf(r) != '"' || json.Unmarshal(r, f.dst) != nil {
			return nil, badReport("The listing's %s is not a string.", f.key)
		}
		if n := jsLen(*f.dst); n > f.max {
			return nil, badReport("The listing's %s is %d characters; at most %d are allowed.", f.key, n, f.max)
		}
		if strings.IndexFunc(*f.dst, isControl) >= 0 {
			return nil, badReport("The listing's %s holds a control character.", f.key)
		}
	}
	return l, nil
}

func isControl(r rune) bool { return r <= 0x1f || r == 0x7f }

func parseSpend(raw json.RawMessage) (*Spend, error) {
	o, err := object(raw)
	if err != nil {
		return nil, badReport("The report's spend is not an object.")
	}
	s := &Spend{ByPrincipal: []PrincipalSpend{}}
	r, ok := o["month"]
	if !ok || kindOf(r) != '"' || json.Unmarshal(r, &s.Month) != nil || !IsMonth(s.Month) {
		return nil, badReport("The spend's month is not a month written YYYY-MM.")
	}
	if err := figures(o, "spend", &s.USD, &s.Runs, &s.Unpriced); err != nil {
		return nil, err
	}
	if r, ok := o["byPrincipal"]; ok && kindOf(r) != 'n' {
		var raws []json.RawMessage
		if kindOf(r) != '[' || json.Unmarshal(r, &raws) != nil {
			return nil, badReport("The spend's byPrincipal is not a list.")
		}
		if len(raws) > MaxPrincipals {
			return nil, badReport("The spend lists %d principals; at most %d are allowed.", len(raws), MaxPrincipals)
		}
		for i, pr := range raws {
			po, err := object(pr)
			if err != nil {
				return nil, badReport("Principal %d of the spend is not an object.", i+1)
			}
			var p PrincipalSpend
			r, ok := po["principal"]
			switch {
			case !ok:
				return nil, badReport("Principal %d of the spend has no principal (a string, or null).", i+1)
			case kindOf(r) == 'n':
			case kindOf(r) == '"':
				var name string
				if json.Unmarshal(r, &name) != nil {
					return nil, badReport("Principal %d of the spend is not a string.", i+1)
				}
				if n := jsLen(name); n < 1 || n > MaxPrincipalLen {
					return nil, badReport("Principal %d of the spend is %d characters; a principal has 1 to %d.", i+1, n, MaxPrincipalLen)
				}
				p.Principal = &name
			default:
				return nil, badReport("Principal %d of the spend is not a string or null.", i+1)
			}
			if err := figures(po, fmt.Sprintf("principal %d's spend", i+1), &p.USD, &p.Runs, &p.Unpriced); err != nil {
				return nil, err
			}
			s.ByPrincipal = append(s.ByPrincipal, p)
		}
	}
	return s, nil
}

// figures reads usd, runs and unpriced from o.
func figures(o map[string]json.RawMessage, what string, usd *float64, runs, unpriced *int64) error {
	u, err := number(o, "usd", what)
	if err != nil {
		return err
	}
	*usd = RoundUSD(u)
	for _, f := range []struct {
		key string
		dst *int64
	}{{"runs", runs}, {"unpriced", unpriced}} {
		v, err := number(o, f.key, what)
		if err != nil {
			return err
		}
		if v != math.Trunc(v) {
			return badReport("The %s's %s is not a whole number.", what, f.key)
		}
		*f.dst = int64(v)
	}
	return nil
}

func number(o map[string]json.RawMessage, key, what string) (float64, error) {
	r, ok := o[key]
	var v float64
	if !ok || kindOf(r) != '0' || json.Unmarshal(r, &v) != nil {
		return 0, badReport("The %s has no number %s.", what, key)
	}
	if math.IsNaN(v) || v < 0 || v >= SpendFigureBound {
		return 0, badReport("The %s's %s is not a number from 0 to under %g.", what, key, float64(SpendFigureBound))
	}
	return v, nil
}

// RoundUSD rounds a non-negative dollar figure to 1/10000 of a dollar, as
// chant's Math.round(x * 10000) / 10000 does.
func RoundUSD(v float64) float64 {
	return math.Floor(v*10000+0.5) / 10000
}

// object decodes raw as a JSON object; the last of duplicated keys wins, as
// JSON.parse reads them. Anything that is not exactly one object is an error.
func object(raw []byte) (map[string]json.RawMessage, error) {
	if kindOf(raw) != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// kindOf tells a JSON value's kind from its first byte: '{', '[', '"', '0'
// for numbers, 't', 'f', 'n', or 0 for none.
func kindOf(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return '0'
	case c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n':
		return c
	}
	return 0
}

// isC0 reports whether r is a C0 control character, which the protocol's
// schema allows in no scope word.
func isC0(r rune) bool { return r < 0x20 }
