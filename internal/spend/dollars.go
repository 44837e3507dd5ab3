package spend

import (
	"math"
	"strconv"
)

// Dollars is an amount of micro-dollars, as the broker keeps money, in
// dollars, as every JSON view of the admin API carries it.
func Dollars(micros int64) float64 { return float64(micros) / 1e6 }

// Micros is an amount of dollars, as a JSON view carries it, in
// micro-dollars, rounded to the nearest: the inverse of Dollars.
func Micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// FormatDollars writes an amount of dollars, as a JSON view carries it,
// as FormatUSD writes its micro-dollars: "$25.00", "$0.0191", with at
// least two decimals and at most six.
func FormatDollars(usd float64) string { return FormatUSD(Micros(usd)) }

// FormatTokens writes a count of tokens, such as a price's context
// length, as 200K or 1M when it is whole so, and as its digits when not.
func FormatTokens(n int64) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.FormatInt(n/1000, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}
