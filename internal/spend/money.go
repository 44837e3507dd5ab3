package spend

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxUSD is the largest amount ParseUSD takes: a billion dollars.
const MaxUSD = 1_000_000_000

// FormatUSD writes an amount of micro-dollars as dollars: "$25.00",
// "$0.0191", with at least two decimals and at most six.
func FormatUSD(micros int64) string { return usdAlike(micros)(micros) }

// usdAlike returns a formatter of micro-dollars in dollars with as many
// decimals (2 to 6) as the finest of vals needs.
func usdAlike(vals ...int64) func(int64) string {
	decimals := 2
	for _, v := range vals {
		if v < 0 {
			v = -v
		}
		frac := strings.TrimRight(fmt.Sprintf("%06d", v%1_000_000), "0")
		decimals = max(decimals, len(frac))
	}
	return func(micros int64) string {
		sign := ""
		if micros < 0 {
			sign, micros = "-", -micros
		}
		frac := fmt.Sprintf("%06d", micros%1_000_000)[:decimals]
		return fmt.Sprintf("%s$%d.%s", sign, micros/1_000_000, frac)
	}
}

// ParseUSD reads an amount of dollars, such as "25", "25.00", "$0.50", as
// micro-dollars: digits with at most six decimals, from 0 to MaxUSD.
func ParseUSD(s string) (int64, error) {
	bad := fmt.Errorf("amount %q is not dollars such as 25.00 (digits, at most six decimals, up to %d)", s, MaxUSD)
	v := strings.TrimPrefix(strings.TrimSpace(s), "$")
	whole, frac, hasFrac := strings.Cut(v, ".")
	if whole == "" || len(whole) > 10 || len(frac) > 6 || (hasFrac && frac == "") || !digits(whole) || !digits(frac) {
		return 0, bad
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > MaxUSD {
		return 0, bad
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	m := w*1_000_000 + f
	if m > MaxUSD*1_000_000 {
		return 0, bad
	}
	return m, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
