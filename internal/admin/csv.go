package admin

import (
	"encoding/csv"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/intentius/boxbroker/internal/operator"
	"github.com/intentius/boxbroker/internal/store"
)

// The CSV exports (GET /api/spend.csv, GET /api/audit.csv and the owner's
// page's) are RFC 4180, written by encoding/csv, with a header row. A cell
// a box chose (a model's name, a principal, a refusal's message) could
// hold a spreadsheet formula; every text cell that begins with =, +, -, @,
// a tab or a carriage return is written with a ' before it, so that a
// spreadsheet shows it as text and runs nothing. They hold what the JSON
// answers hold, and so never a token, a credential or a secret's value.

// CSVCell is v as a CSV export writes it: with a ' before it when it
// begins with a character a spreadsheet reads as the start of a formula.
func CSVCell(v string) string {
	if v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) {
		return "'" + v
	}
	return v
}

// csvUSD writes dollars as a CSV number: the micro-dollars exactly, six
// decimals, no $.
func csvUSD(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }

func csvInt(n int64) string { return strconv.FormatInt(n, 10) }

// csvOpt is a nullable text cell: "" for null.
func csvOpt(p *string) string {
	if p == nil {
		return ""
	}
	return CSVCell(*p)
}

// startCSV sets a CSV download's headers: its type, and an attachment
// named filename.
func startCSV(w http.ResponseWriter, filename string) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	w.WriteHeader(http.StatusOK)
	return csv.NewWriter(w)
}

// SpendCSVGrains are the rows GET /api/spend.csv?by= can hold: usage (one
// per box, payer kind, principal and model; the default), payer (payer
// kind and principal), principal, model and box. Only principal and box
// rows carry charged_usd, the grains charged is kept at.
var SpendCSVGrains = []string{"usage", "payer", "principal", "model", "box"}

// spendCSVGrain reads the request's ?by= value, usage when absent.
func spendCSVGrain(r *http.Request) (string, error) {
	by := r.URL.Query().Get("by")
	if by == "" {
		return "usage", nil
	}
	for _, g := range SpendCSVGrains {
		if g == by {
			return by, nil
		}
	}
	return "", operator.Errorf(operator.Invalid, "by is one of %s.", strings.Join(SpendCSVGrains, ", "))
}

var countsHeader = []string{"calls", "unpriced", "unmeasured", "input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens", "measured_usd"}

func (c SpendCounts) cells() []string {
	return []string{csvInt(c.Calls), csvInt(c.Unpriced), csvInt(c.Unmeasured), csvInt(c.InputTokens), csvInt(c.OutputTokens),
		csvInt(c.CacheWriteTokens), csvInt(c.CacheReadTokens), csvUSD(c.MeasuredUSD)}
}

// writeSpendCSV answers f as a CSV download, one row per line of the
// grain by (one of SpendCSVGrains), each beginning with the month.
func writeSpendCSV(w http.ResponseWriter, f FleetSpend, by string) error {
	cw := startCSV(w, fmt.Sprintf("boxbroker-spend-%s-by-%s.csv", f.Month, by))
	row := func(cells ...string) { _ = cw.Write(cells) }
	switch by {
	case "payer":
		row(append([]string{"month", "payer", "principal"}, countsHeader...)...)
		for _, l := range f.ByPayer {
			row(append([]string{f.Month, CSVCell(l.Payer), csvOpt(l.Principal)}, l.cells()...)...)
		}
	case "principal":
		row(append(append([]string{"month", "principal"}, countsHeader...), "charged_usd")...)
		for _, l := range f.ByPrincipal {
			row(append(append([]string{f.Month, csvOpt(l.Principal)}, l.cells()...), csvUSD(l.ChargedUSD))...)
		}
	case "model":
		row(append([]string{"month", "model", "priced"}, countsHeader...)...)
		for _, l := range f.ByModel {
			row(append([]string{f.Month, CSVCell(l.Model), strconv.FormatBool(l.Priced)}, l.cells()...)...)
		}
	case "box":
		row(append(append([]string{"month", "box"}, countsHeader...), "charged_usd")...)
		for _, l := range f.ByBox {
			row(append(append([]string{f.Month, CSVCell(l.Box)}, l.cells()...), csvUSD(l.ChargedUSD))...)
		}
	default:
		row(append([]string{"month", "box", "payer", "principal", "model"}, countsHeader...)...)
		for _, l := range f.Usage {
			row(append([]string{f.Month, CSVCell(l.Box), CSVCell(l.Payer), csvOpt(l.Principal), csvOpt(l.Model)}, l.cells()...)...)
		}
	}
	cw.Flush()
	return nil // the answer has begun: an error writing it cannot be told
}

// writeAuditCSV answers entries as a CSV download, one row per entry as
// GET /api/audit shows it, newest first; now names the file.
func writeAuditCSV(w http.ResponseWriter, entries []store.AuditEntry, now time.Time) error {
	cw := startCSV(w, "boxbroker-audit-"+now.UTC().Format("20060102T150405Z")+".csv")
	_ = cw.Write([]string{"id", "at", "box", "method", "route", "capability", "words", "status", "reason", "message",
		"duration_ms", "upstream_status", "paid_by", "bytes", "usd"})
	for _, e := range entries {
		v := operator.AuditViewOf(e)
		up := ""
		if v.UpstreamStatus != nil {
			up = strconv.Itoa(*v.UpstreamStatus)
		}
		_ = cw.Write([]string{csvInt(v.ID), v.At, csvOpt(v.Box), CSVCell(v.Method), CSVCell(v.Route), CSVCell(v.Capability),
			CSVCell(strings.Join(v.Words, " ")), strconv.Itoa(v.Status), CSVCell(v.Reason), CSVCell(v.Message),
			strconv.FormatFloat(v.DurationMs, 'f', 3, 64), up, csvOpt(v.PaidBy), csvInt(v.Bytes), csvUSD(v.USD)})
	}
	cw.Flush()
	return nil // the answer has begun: an error writing it cannot be told
}
