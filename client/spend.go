package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"

	"github.com/intentius/boxbroker/internal/protocol"
)

// SpendFromRuns computes a report's spend for month from doc, what
// `chant workspace runs --json` prints, exactly as chant's spendFromRuns
// does. It returns nil, and no error, when doc holds no runs list (a
// failure document, null, an array, or runs that is not a list), and an
// error only when doc is not JSON.
//
// A run counts when its startedAt is a string beginning with month (so
// "2026-10" matches every October run as chant writes them, in UTC). It
// counts under the principal its by names, cut to 200 UTF-16 code units,
// or under the null principal when by is missing, empty or not a string.
// Only a finite, non-negative amount whose currency is exactly "USD" is
// summed; any other run is counted in unpriced, never as zero. Principals
// come in the order the runs first name them, at most 50; later ones
// count in the totals only. Dollar figures are summed, then rounded to
// 1/10000 of a dollar.
func SpendFromRuns(doc []byte, month string) (*Spend, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // an amount of 1e400 reads as +Inf and is unpriced, as JSON.parse reads it
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the runs document is not JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("the runs document holds more than one JSON value")
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, nil
	}
	runs, ok := top["runs"].([]any)
	if !ok {
		return nil, nil
	}
	type tally struct {
		principal *string
		usd       float64
		runs      int64
		unpriced  int64
	}
	var (
		total   tally
		order   []*tally
		byName  = map[string]*tally{}
		nullOne *tally
	)
	for _, r := range runs {
		run, ok := r.(map[string]any)
		if !ok {
			continue
		}
		started, ok := run["startedAt"].(string)
		if !ok || !strings.HasPrefix(started, month) {
			continue
		}
		usd, priced := usdCost(run["cost"])
		var p *tally
		if name, ok := run["by"].(string); ok && name != "" {
			name = cutUTF16(name, protocol.MaxPrincipalLen)
			p = byName[name]
			if p == nil && len(order) < protocol.MaxPrincipals {
				p = &tally{principal: &name}
				byName[name] = p
				order = append(order, p)
			}
		} else {
			if nullOne == nil && len(order) < protocol.MaxPrincipals {
				nullOne = &tally{}
				order = append(order, nullOne)
			}
			p = nullOne
		}
		for _, t := range []*tally{&total, p} {
			if t == nil {
				continue
			}
			t.runs++
			if priced {
				t.usd += usd
			} else {
				t.unpriced++
			}
		}
	}
	s := &Spend{Month: month, USD: protocol.RoundUSD(total.usd), Runs: total.runs, Unpriced: total.unpriced, ByPrincipal: []PrincipalSpend{}}
	for _, t := range order {
		s.ByPrincipal = append(s.ByPrincipal, PrincipalSpend{Principal: t.principal, USD: protocol.RoundUSD(t.usd), Runs: t.runs, Unpriced: t.unpriced})
	}
	return s, nil
}

// usdCost returns a run's cost in dollars, and false when the run is
// unpriced: no cost object, an amount that is not a finite non-negative
// number, or a currency other than exactly "USD".
func usdCost(v any) (float64, bool) {
	cost, ok := v.(map[string]any)
	if !ok || cost["currency"] != "USD" {
		return 0, false
	}
	n, ok := cost["amount"].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !isRange(err) {
		return 0, false
	}
	if math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
		return 0, false
	}
	return f, true
}

// isRange reports a ParseFloat overflow or underflow, which JSON.parse reads
// as ±Infinity or 0 rather than refusing.
func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// cutUTF16 cuts s to its first n UTF-16 code units, as JavaScript's
// s.slice(0, n) does, except that a surrogate pair the cut would split is
// left out whole (Go strings hold no lone surrogates).
func cutUTF16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1 // an invalid byte decodes as U+FFFD, one unit
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}
